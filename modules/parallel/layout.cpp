// Layout arithmetic and the per-dimension groups.
module infini.parallel;
import infini.std;

namespace infini::parallel {

Layout::Layout(int world_size, int tp, int pp, int vpp) : world_size_(world_size), dp_(0), tp_(tp), pp_(pp), vpp_(vpp) {
  if (world_size < 1 || tp < 1 || pp < 1 || vpp < 1)
    throw Error("Layout", concat("expected positive sizes, got world ", world_size, ", tp ", tp, ", pp ", pp,
                                 ", vpp ", vpp));
  if (world_size % (tp * pp) != 0)
    throw Error("Layout", concat("a world of ", world_size, " ranks does not split into tp=", tp, " x pp=", pp,
                                 " (", tp * pp, " ranks per data-parallel replica)"));
  dp_ = world_size / (tp * pp);
}

int Layout::rank_of(LayoutCoord c) const {
  if (c.dp < 0 || c.dp >= dp_ || c.tp < 0 || c.tp >= tp_ || c.pp < 0 || c.pp >= pp_)
    throw IndexError("Layout::rank_of", concat("coordinate (dp ", c.dp, ", tp ", c.tp, ", pp ", c.pp,
                                               ") is outside ", str()));
  return c.tp + tp_ * (c.dp + dp_ * c.pp);
}

LayoutCoord Layout::coord_of(int rank) const {
  if (rank < 0 || rank >= world_size_)
    throw IndexError("Layout::coord_of", concat("rank ", rank, " is outside a world of ", world_size_));
  return {.dp = rank / tp_ % dp_, .tp = rank % tp_, .pp = rank / (tp_ * dp_)};
}

std::string Layout::str() const {
  return concat("DP=", dp_, " TP=", tp_, " PP=", pp_) + (vpp_ > 1 ? concat(" VPP=", vpp_) : "");
}

ParallelGroups make_parallel_groups(const Layout& layout, const std::shared_ptr<ProcessGroup>& world) {
  if (world->size() != layout.world_size())
    throw Error("make_parallel_groups",
                concat("layout ", layout.str(), " needs ", layout.world_size(), " ranks, the group has ", world->size()));
  const LayoutCoord c = layout.coord_of(world->rank());
  // Each split's color numbers the group among those of its dimension; the key orders
  // the ranks by the varying coordinate.
  const int dp_index = c.tp + layout.tp() * c.pp;
  const int tp_index = c.dp + layout.dp() * c.pp;
  const int pp_index = c.tp + layout.tp() * c.dp;
  return {.world = world,
          .dp = world->split(dp_index, c.dp, concat("dp[", dp_index, "]")),
          .tp = world->split(tp_index, c.tp, concat("tp[", tp_index, "]")),
          .pp = world->split(pp_index, c.pp, concat("pp[", pp_index, "]")),
          .coord = c};
}

}  // namespace infini::parallel
