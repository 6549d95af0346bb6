// Layout: the world decomposed as dp x tp x pp in Megatron's order (tensor parallel
// fastest, then data parallel, then pipeline: rank = tp + TP * (dp + DP * pp)), with vpp
// virtual pipeline stages per pipeline rank. ParallelGroups holds one group per dimension.
export module infini.parallel:layout;
import infini.std;
import :process_group;

export namespace infini::parallel {

struct LayoutCoord {
  int dp = 0, tp = 0, pp = 0;
  friend bool operator==(const LayoutCoord&, const LayoutCoord&) = default;
};

class Layout {
 public:
  // dp = world_size / (tp * pp); an Error names the sizes when that does not divide.
  Layout(int world_size, int tp = 1, int pp = 1, int vpp = 1);

  int world_size() const { return world_size_; }
  int dp() const { return dp_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int vpp() const { return vpp_; }

  int rank_of(LayoutCoord coord) const;  // IndexError when a coordinate is out of range
  LayoutCoord coord_of(int rank) const;  // IndexError when rank is not in the world
  std::string str() const;               // "DP=2 TP=1 PP=1" (" VPP=v" when v > 1)

 private:
  int world_size_, dp_, tp_, pp_, vpp_;
};

// This rank's groups: ranks that differ only in that coordinate share a group ("dp[i]"
// for the i-th data-parallel group, and so on).
struct ParallelGroups {
  std::shared_ptr<ProcessGroup> world, dp, tp, pp;
  LayoutCoord coord;
};

// Collective over `world` (whose size must be layout.world_size()).
ParallelGroups make_parallel_groups(const Layout& layout, const std::shared_ptr<ProcessGroup>& world);

}  // namespace infini::parallel
