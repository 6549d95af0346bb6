module;
#include <cmath>
#include <cstddef>
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {

namespace {

// Bucket group numbers as concat prints them.
std::vector<std::int64_t> numbers(const std::vector<int>& groups) { return {groups.begin(), groups.end()}; }

}  // namespace

struct Reducer::State : std::enable_shared_from_this<State> {
  struct Bucket {
    std::vector<std::size_t> params;
    DataType dtype = kFloat32;          // the parameters' own (of buffer, weights, shard, block)
    std::vector<std::int64_t> offsets;  // of each parameter in `buffer`, in elements
    Tensor buffer;                      // 1-d: the parameters' gradients back to back
    std::size_t pending = 0;            // parameters not ready in this backward
    Work work;
    // shard_gradients: `buffer` is padded to a multiple of the group size; the parameters
    // live in `weights` (same layout) and this rank's block of the average lands in `block`.
    Tensor weights, block;
    std::vector<std::size_t> pieces;  // indices of this rank's pieces in it
    // release_gradients: `buffer` (numel elements) exists only while a pass fills and reduces
    // it; the reduce-scatter lands in `incoming`, which drain() adds into `block`.
    std::int64_t numel = 0;
    Tensor incoming;
    bool drained = false;
    // shard_parameters: this rank's block of `weights` in storage of its own; whether
    // `weights` holds memory (gathered or being gathered), and the gather in flight.
    Tensor shard;
    bool gathered = true;
    Work gathering;
    // A lower gather dtype: the weights in it (the parameters are views of `low`, or of `weights`
    // while gathered in full precision), the shard cast to it for the gather in flight, and
    // which of the two the parameters view and was (or is being) gathered.
    Tensor low, sent;
    bool full = true;
  };

  std::vector<Tensor> params;
  std::vector<std::string> names;
  std::shared_ptr<ProcessGroup> group;
  ReducerOptions options;
  bool sync = true;
  std::vector<int> pass_groups;  // set_sync's groups: the only buckets of the coming passes (empty: all)

  std::vector<Bucket> buckets;
  std::vector<std::size_t> bucket_of, slot_of;  // parameter -> its bucket and place in it
  std::vector<int> group_of_bucket;             // bucket_groups: each bucket's group
  // The synchronised backward in progress (its finalize() is queued).
  bool in_backward = false;
  std::vector<bool> ready;
  std::size_t next_launch = 0;
  std::vector<std::size_t> pass_order, first_order, launches;
  std::size_t launched_in_backward = 0;
  std::int64_t backwards = 0;
  // shard_gradients: this rank's blocks as leaves, their parameters, and their gradients.
  std::vector<Tensor> pieces, piece_grads;
  std::vector<std::size_t> piece_owners;
  std::vector<std::int64_t> piece_offsets;  // in their parameters

  std::string param_name(std::size_t i) const {
    return names.size() > i && !names[i].empty() ? concat("parameter '", names[i], "'") : concat("parameter ", i);
  }

  // params[i]'s slice of its bucket, in the parameter's shape.
  Tensor bucket_view(std::size_t i) const {
    const Bucket& b = buckets[bucket_of[i]];
    const std::size_t slot = slot_of[i];
    return b.buffer.narrow(0, b.offsets[slot], params[i].numel()).view(params[i].shape());
  }

  bool grad_is_view(std::size_t i, const Tensor& view) const {
    const Tensor& g = params[i].grad();
    return g.defined() && g.numel() > 0 && g.data_ptr() == view.data_ptr() && g.strides() == view.strides();
  }

  int group_of(std::size_t i) const { return options.bucket_groups.empty() ? 0 : options.bucket_groups[i]; }
  DataType gather_dtype(std::size_t i) const {
    return options.gather_dtypes.empty() ? params[i].dtype() : options.gather_dtypes[i];
  }

  // Whether bucket k takes part in the synchronised pass (all do without a pass group).
  bool in_pass(std::size_t k) const {
    return pass_groups.empty() || std::ranges::find(pass_groups, group_of_bucket[k]) != pass_groups.end();
  }

  // assign_buckets' buckets, each cut where the parameters' group or gather dtype changes.
  std::vector<std::vector<std::size_t>> grouped_buckets(const std::vector<std::size_t>& order) const {
    std::vector<std::vector<std::size_t>> out;
    for (const auto& members : assign_buckets(params, order, options.buckets))
      for (std::size_t s = 0; s < members.size(); ++s) {
        if (s == 0 || group_of(members[s]) != group_of(members[s - 1]) ||
            gather_dtype(members[s]) != gather_dtype(members[s - 1]))
          out.emplace_back();
        out.back().push_back(members[s]);
      }
    return out;
  }

  void make_buckets(const std::vector<std::size_t>& order) {
    std::vector<Bucket> made;
    const std::int64_t ranks = group->size();
    group_of_bucket.clear();
    for (auto& members : grouped_buckets(order)) {
      group_of_bucket.push_back(group_of(members.front()));
      Bucket b;
      b.dtype = params[members.front()].dtype();
      std::int64_t total = 0;
      for (std::size_t i : members) {
        b.offsets.push_back(total);
        total += params[i].numel();
      }
      if (options.shard_gradients()) total = (total + ranks - 1) / ranks * ranks;  // equal blocks
      b.numel = total;
      b.params = std::move(members);
      // release_gradients: a pass allocates the buffer; sharding moves one bucket at a time.
      if (!options.release_gradients()) allocate_buffer(b);
      made.push_back(std::move(b));
    }
    buckets = std::move(made);
    for (std::size_t k = 0; k < buckets.size(); ++k)
      for (std::size_t s = 0; s < buckets[k].params.size(); ++s) {
        bucket_of[buckets[k].params[s]] = k;
        slot_of[buckets[k].params[s]] = s;
      }
    if (options.shard_gradients())
      for (Bucket& b : buckets) shard(b);
    // Gradients already held as views of the old buckets move into the new ones.
    if (options.gradient_as_bucket_view)
      for (std::size_t i = 0; i < params.size(); ++i)
        if (params[i].grad().defined()) {
          Tensor view = bucket_view(i);
          view.copy_(params[i].grad());
          params[i].set_grad(view);
        }
    reset_pass();
  }

  // ZeRO-1: moves the bucket's parameters into its `weights` and makes this rank's pieces.
  // ZeRO-3: the pieces live in `shard`, and `weights` is released.
  void shard(Bucket& b) {
    NoGradGuard no_grad;
    const Tensor& first = params[b.params.front()];
    const TensorOptions like{.dtype = b.dtype, .device = first.device()};
    const std::int64_t length = b.numel / group->size(), start = length * group->rank();
    b.weights = zeros({b.numel}, like);
    b.block = zeros({length}, like);
    for (std::size_t slot = 0; slot < b.params.size(); ++slot) {
      const std::size_t i = b.params[slot];
      const std::int64_t offset = b.offsets[slot], numel = params[i].numel();
      Tensor home = b.weights.narrow(0, offset, numel).view(params[i].shape());
      home.copy_(params[i]);
      params[i].set_data(home);
    }
    if (options.shard_parameters()) b.shard = b.weights.narrow(0, start, length).clone();
    const Tensor& owner = options.shard_parameters() ? b.shard : b.weights;
    const std::int64_t owner_start = options.shard_parameters() ? start : 0;  // of `owner` in the bucket
    for (std::size_t slot = 0; slot < b.params.size(); ++slot) {
      const std::size_t i = b.params[slot];
      const std::int64_t offset = b.offsets[slot], numel = params[i].numel();
      const std::int64_t lo = std::max(offset, start), hi = std::min(offset + numel, start + length);
      if (lo >= hi) continue;
      b.pieces.push_back(pieces.size());
      pieces.push_back(owner.narrow(0, lo - owner_start, hi - lo).detach().requires_grad_());
      piece_grads.push_back(b.block.narrow(0, lo - start, hi - lo));
      piece_owners.push_back(i);
      piece_offsets.push_back(lo - offset);
    }
    if (options.shard_parameters()) {
      b.weights.storage().release_memory();
      b.gathered = false;
      if (const DataType low = gather_dtype(b.params.front()); low != b.dtype) {
        b.low = empty({b.numel}, TensorOptions{.dtype = low, .device = first.device()});
        b.low.storage().release_memory();
        view_weights(b, false);
      }
    }
  }

  // Makes the bucket's parameters views of its full-precision weights or of its `low` ones.
  void view_weights(Bucket& b, bool full) {
    const Tensor& weights = full ? b.weights : b.low;
    for (std::size_t slot = 0; slot < b.params.size(); ++slot) {
      const std::size_t i = b.params[slot];
      params[i].set_data(weights.narrow(0, b.offsets[slot], params[i].numel()).view(params[i].shape()));
    }
    b.full = full;
  }

  // The bucket's zeros (release_gradients: again for each pass).
  void allocate_buffer(Bucket& b) const {
    const Tensor& first = params[b.params.front()];
    b.buffer = zeros({b.numel}, TensorOptions{.dtype = b.dtype, .device = first.device()});
  }

  void reset_pass() {
    in_backward = false;
    std::fill(ready.begin(), ready.end(), false);
    for (Bucket& b : buckets) {
      b.pending = b.params.size();
      b.work = Work();
      b.drained = false;
    }
    next_launch = 0;
    pass_order.clear();
  }

  // Copies params[i]'s grad into its bucket (zeros without one) and launches what is ready.
  void mark_ready(std::size_t i) {
    if (!in_pass(bucket_of[i]))
      throw Error("Reducer", concat(param_name(i), " of bucket group ", group_of(i), " got a gradient in a pass "
                                    "synchronising group", pass_groups.size() > 1 ? "s " : " ", numbers(pass_groups),
                                    " only"));
    Bucket& bucket = buckets[bucket_of[i]];
    const Tensor& g = params[i].grad();
    // release_gradients: a bucket of one parameter needing no padding reduces the gradient itself.
    const bool alias = options.release_gradients() && bucket.params.size() == 1 && bucket.numel == params[i].numel() &&
                       g.defined() && g.is_contiguous() && g.dtype() == bucket.dtype;
    if (alias) bucket.buffer = g.detach().reshape({-1});
    if (!bucket.buffer.defined()) allocate_buffer(bucket);
    Tensor view = bucket_view(i);
    if (alias) {
    } else if (!g.defined()) {
      view.zero_();
    } else if (!(options.gradient_as_bucket_view && grad_is_view(i, view))) {
      view.copy_(g);
    }
    if (options.release_gradients()) params[i].set_grad(Tensor());  // its bucket holds it now
    ready[i] = true;
    pass_order.push_back(i);
    --bucket.pending;
    launch_ready();
    progress();
    if (options.release_gradients()) drain_finished();
  }

  // release_gradients: frees what the collectives are done with, and waits for the oldest
  // reduce-scatters while more than kInFlight buckets hold their full-size buffers (FSDP's
  // bound): on a slow link they would otherwise pile up to the whole gradient.
  void drain_finished() {
    constexpr std::size_t kInFlight = 2;
    std::vector<std::size_t> in_flight;
    for (std::size_t k = 0; k < next_launch; ++k) {
      Bucket& b = buckets[k];
      if (b.drained || !b.work.state()) continue;
      if (b.work.state()->done()) drain(b);
      else in_flight.push_back(k);
    }
    for (std::size_t j = 0; j + kInFlight < in_flight.size(); ++j) drain(buckets[in_flight[j]]);
  }

  // Launches, in index order, the buckets of the pass whose parameters are all ready.
  void launch_ready() {
    while (next_launch < buckets.size() && (!in_pass(next_launch) || buckets[next_launch].pending == 0)) {
      if (in_pass(next_launch)) launch(next_launch);
      ++next_launch;
    }
  }

  // release_gradients: adds the bucket's reduced block into `block` (a new sum when the
  // optimizer's zero_grad cleared its pieces' grads) and frees its full-size buffers.
  void drain(Bucket& b) {
    b.work.wait();  // done: rethrows the collective's error
    const bool restart = b.pieces.empty() || !pieces[b.pieces.front()].grad().defined();
    if (restart) {
      b.block.storage().reallocate();  // after release_gradient_blocks
      b.block.copy_(b.incoming);
    } else {
      kernels::accumulate_(b.block, b.incoming);
    }
    b.incoming = Tensor();
    b.buffer = Tensor();
    b.drained = true;
  }

  // MPI has no progress thread: the buckets in flight move on (the next steps of a ring
  // all-reduce are issued) only when polled, so every hook polls once.
  void progress() {
    std::vector<Progress*> engines;
    for (std::size_t k = 0; k < next_launch; ++k) {
      const auto& state = buckets[k].work.state();
      if (!state || state->done()) continue;
      for (Progress* engine : state->engines())
        if (std::find(engines.begin(), engines.end(), engine) == engines.end()) engines.push_back(engine);
    }
    for (Progress* engine : engines) engine->poll();
  }

  void launch(std::size_t k) {
    Bucket& b = buckets[k];
    const DataType t = b.buffer.dtype();
    const ReduceOptions average{.op = ReduceOp::Avg,
                                .accumulate_in_float32 = t == kBFloat16 || t == kFloat16,
                                .timeout = options.timeout};
    if (options.release_gradients()) b.incoming = empty_like(b.block);
    b.work = options.shard_gradients()
                 ? group->reduce_scatter(options.release_gradients() ? b.incoming : b.block, b.buffer, average)
                 : group->all_reduce(b.buffer, average);
    launches.push_back(k);
  }

  // The hook: params[i]'s gradient was accumulated by a backward pass.
  void on_grad(std::size_t i) {
    if (!sync) return;
    if (!in_backward) {
      in_backward = true;
      launches.clear();
      if (options.finalize_explicitly) return mark_ready(i);
      // A pass that throws drops its callbacks: the token's destructor then forgets the pass
      // (its launched all-reduces finish on their own), so the next backward starts afresh.
      auto token = std::shared_ptr<void>(nullptr, [weak = weak_from_this()](void*) {
        if (auto self = weak.lock(); self && self->in_backward) self->reset_pass();
      });
      autograd::queue_callback([weak = weak_from_this(), token] {
        if (auto self = weak.lock()) self->finalize();
      });
    }
    mark_ready(i);
  }

  // The end of a synchronised backward.
  void finalize() {
    NoGradGuard no_grad;
    launched_in_backward = launches.size();
    std::vector<std::size_t> missing;  // parameters of the pass without a gradient on this rank
    for (std::size_t i = params.size(); i-- > 0;)
      if (!ready[i] && in_pass(bucket_of[i])) {
        if (!params[i].grad().defined()) missing.push_back(i);
        mark_ready(i);
      }
    // Which parameters some rank has a gradient for (one small all-reduce per step).
    Tensor used;
    if (options.find_unused_parameters) {
      used = ones({static_cast<std::int64_t>(params.size())}, TensorOptions{.dtype = kUInt8});
      for (std::size_t i : missing) used.data_ptr<std::uint8_t>()[i] = 0;
      group->all_reduce(used, {.op = ReduceOp::Max, .timeout = options.timeout}).wait();
    }
    std::vector<Work> works;
    for (const Bucket& b : buckets) works.push_back(b.work);  // empty for buckets outside the pass
    const std::vector<std::size_t> order = pass_order;
    try {
      when_all(works).wait();
    } catch (...) {
      reset_pass();
      throw;
    }
    if (options.release_gradients())
      for (std::size_t k = 0; k < buckets.size(); ++k)
        if (in_pass(k) && !buckets[k].drained) drain(buckets[k]);
    if (options.shard_gradients()) {
      for (std::size_t k = 0; k < buckets.size(); ++k)
        if (in_pass(k))
          for (std::size_t piece : buckets[k].pieces) pieces[piece].set_grad(piece_grads[piece]);
    } else {
      write_back(used);
    }
    ++backwards;
    reset_pass();
    if (first_order.empty()) {
      first_order = order;
      if (options.rebuild_buckets && !options.shard_gradients()) rebuild(order);
    }
    if (!missing.empty() && !options.find_unused_parameters) {
      std::string list;
      for (std::size_t i : missing) list += (list.empty() ? "" : ", ") + param_name(i);
      throw Error("DistributedDataParallel",
                  concat("rank ", group->rank(), ": ", list, " received no gradient in this backward pass; its average "
                         "used zeros from this rank. If the forward pass does not use every parameter, construct "
                         "DistributedDataParallel with find_unused_parameters = true"));
    }
  }

  // The averaged gradients into grad(), except where `used` says no rank had one.
  void write_back(const Tensor& used) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (used.defined() && used.data_ptr<std::uint8_t>()[i] == 0) continue;
      Tensor view = bucket_view(i);
      const Tensor& g = params[i].grad();
      if (options.gradient_as_bucket_view) {
        if (!grad_is_view(i, view)) params[i].set_grad(view);
      } else if (g.defined()) {
        Tensor(g).copy_(view);
      } else {
        params[i].set_grad(view.clone());
      }
    }
  }

  // New buckets from rank 0's ready order.
  void rebuild(const std::vector<std::size_t>& order) {
    Tensor shared = empty({static_cast<std::int64_t>(order.size())}, TensorOptions{.dtype = kInt64});
    for (std::size_t k = 0; k < order.size(); ++k) shared.data_ptr<std::int64_t>()[k] = static_cast<std::int64_t>(order[k]);
    group->broadcast(shared, 0, {.timeout = options.timeout}).wait();
    std::vector<std::size_t> root_order(order.size());
    for (std::size_t k = 0; k < order.size(); ++k) root_order[k] = static_cast<std::size_t>(shared.data_ptr<std::int64_t>()[k]);
    make_buckets(root_order);
  }
};

Reducer::Reducer(std::vector<Tensor> params, std::vector<std::string> names, std::shared_ptr<ProcessGroup> group,
                 ReducerOptions options)
    : state_(std::make_shared<State>()) {
  if (!group) throw Error("Reducer", "expected a process group, got nullptr");
  if (options.shard_gradients() && options.gradient_as_bucket_view)
    throw Error("Reducer", "ZeRO keeps only a block of each bucket's average: gradient_as_bucket_view "
                           "cannot apply");
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    if (!p.defined() || !p.requires_grad() || !p.is_leaf())
      throw Error("Reducer", concat("parameter ", i, " must be a defined leaf tensor that requires grad"));
    if (!p.is_contiguous())
      throw Error("Reducer", concat("parameter ", i, " must be contiguous, got shape ", p.shape(), " strides ", p.strides()));
  }
  State& s = *state_;
  s.params = std::move(params);
  s.names = std::move(names);
  s.group = std::move(group);
  if (!options.bucket_groups.empty() && options.bucket_groups.size() != s.params.size())
    throw Error("Reducer", concat("bucket_groups has ", options.bucket_groups.size(), " entries for ", s.params.size(),
                                  " parameters"));
  if (!options.gather_dtypes.empty()) {
    if (!options.shard_parameters())
      throw Error("Reducer", "gather_dtypes is the dtype of sharded parameters' gathers: it needs ZeRO-3 (ZeroStage::kParameters)");
    if (options.gather_dtypes.size() != s.params.size())
      throw Error("Reducer", concat("gather_dtypes has ", options.gather_dtypes.size(), " entries for ", s.params.size(),
                                    " parameters"));
    for (std::size_t i = 0; i < s.params.size(); ++i) {
      const DataType own = s.params[i].dtype(), to = options.gather_dtypes[i];
      if (to != own && !(own == kFloat32 && (to == kBFloat16 || to == kFloat16)))
        throw DTypeError("Reducer", concat(s.param_name(i), " (", own, ") cannot be gathered in ", to,
                                           ": expected its own dtype, or bfloat16 or float16 for a float32 parameter"));
    }
  }
  if (!options.bucket_groups.empty() && options.rebuild_buckets && !options.shard_gradients())
    options.rebuild_buckets = false;  // rebuilt buckets would follow the ready order across groups
  s.options = options;
  s.bucket_of.resize(s.params.size());
  s.slot_of.resize(s.params.size());
  s.ready.resize(s.params.size());
  if (!s.params.empty()) s.make_buckets(reverse_order(s.params.size()));
  for (std::size_t i = 0; i < s.params.size(); ++i)
    s.params[i].register_post_accumulate_grad_hook([weak = std::weak_ptr<State>(state_), i](const Tensor&) {
      if (auto self = weak.lock()) self->on_grad(i);
    });
}

Reducer::~Reducer() = default;

const std::vector<Tensor>& Reducer::parameters() const { return state_->params; }
const std::shared_ptr<ProcessGroup>& Reducer::group() const { return state_->group; }

void Reducer::set_sync(bool sync, std::vector<int> groups) {
  State& s = *state_;
  if (!groups.empty() && s.options.bucket_groups.empty())
    throw Error("Reducer::set_sync",
                concat("groups ", numbers(groups), " given, but the reducer has no bucket_groups"));
  if (s.in_backward && groups != s.pass_groups)
    throw Error("Reducer::set_sync", "the pass group changes only between synchronised steps (after finalize)");
  s.sync = sync;
  s.pass_groups = std::move(groups);
}

void Reducer::finalize() {
  if (!state_->options.finalize_explicitly)
    throw Error("Reducer::finalize", "expected finalize_explicitly = true (else the backward pass finalizes)");
  if (state_->in_backward) state_->finalize();
}
bool Reducer::sync() const { return state_->sync; }

std::vector<std::vector<std::size_t>> Reducer::buckets() const {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& b : state_->buckets) out.push_back(b.params);
  return out;
}

const std::vector<std::size_t>& Reducer::ready_order() const { return state_->first_order; }
const std::vector<std::size_t>& Reducer::launch_order() const { return state_->launches; }
std::size_t Reducer::buckets_launched_during_backward() const { return state_->launched_in_backward; }
std::int64_t Reducer::synchronized_backwards() const { return state_->backwards; }

const std::vector<Tensor>& Reducer::shard_pieces() const { return state_->pieces; }
const std::vector<std::size_t>& Reducer::shard_owners() const { return state_->piece_owners; }
const std::vector<std::int64_t>& Reducer::shard_offsets() const { return state_->piece_offsets; }

double Reducer::sharded_grad_norm() const {
  const State& s = *state_;
  if (!s.options.shard_gradients()) throw Error("Reducer::sharded_grad_norm", "expected ZeRO-1, 2 or 3");
  NoGradGuard no_grad;
  Tensor squares = zeros({1}, TensorOptions{.dtype = kFloat64});
  for (const auto& b : s.buckets) {
    const Tensor block = b.block.to(kFloat64);
    squares.data_ptr<double>()[0] += sum(mul(block, block)).item<double>();
  }
  s.group->all_reduce(squares, {.timeout = s.options.timeout}).wait();
  return std::sqrt(squares.item<double>());
}

void Reducer::release_gradient_blocks() {
  State& s = *state_;
  if (!s.options.release_gradients())
    throw Error("Reducer::release_gradient_blocks", "expected ZeRO-2 or 3");
  for (std::size_t k = 0; k < s.pieces.size(); ++k)
    if (s.pieces[k].grad().defined())
      throw Error("Reducer::release_gradient_blocks", concat("piece ", k, " (of ", s.param_name(s.piece_owners[k]),
                                                             ") still holds its gradient: clear it first (zero_grad)"));
  for (const auto& b : s.buckets) b.block.storage().release_memory();
}

Work Reducer::all_gather_parameters() {
  State& s = *state_;
  if (!s.options.shard_gradients()) throw Error("Reducer::all_gather_parameters", "expected ZeRO-1, 2 or 3");
  NoGradGuard no_grad;
  std::vector<Work> works;
  if (s.options.shard_parameters()) return when_all(works);  // gathered when used
  for (const auto& b : s.buckets) {
    const std::int64_t length = b.block.numel();
    const Tensor mine = b.weights.narrow(0, length * s.group->rank(), length).clone();
    works.push_back(s.group->all_gather(b.weights, mine, {.timeout = s.options.timeout}));
  }
  return when_all(works);
}

Work Reducer::gather_bucket(std::size_t k, bool full_precision) {
  State& s = *state_;
  if (!s.options.shard_parameters()) throw Error("Reducer::gather_bucket", "expected ZeRO-3");
  auto& b = s.buckets.at(k);
  const bool full = full_precision || !b.low.defined();
  if (b.gathered && (b.full || !full)) return b.gathering;
  if (b.gathered) release_bucket(k);  // in the lower dtype, and full precision is asked for
  if (b.low.defined() && b.full != full) s.view_weights(b, full);
  Tensor& weights = full ? b.weights : b.low;
  weights.storage().reallocate();
  b.sent = full ? b.shard : b.shard.to(b.low.dtype());
  b.gathering = s.group->all_gather(weights, b.sent, {.timeout = s.options.timeout});
  b.gathered = true;
  return b.gathering;
}

void Reducer::release_bucket(std::size_t k) {
  State& s = *state_;
  if (!s.options.shard_parameters()) throw Error("Reducer::release_bucket", "expected ZeRO-3");
  auto& b = s.buckets.at(k);
  if (!b.gathered) return;
  if (b.gathering.state()) b.gathering.wait();  // the collective still writes into the weights
  b.gathering = Work();
  b.sent = Tensor();
  (b.full ? b.weights : b.low).storage().release_memory();
  b.gathered = false;
}

bool Reducer::bucket_gathered(std::size_t k) const { return state_->buckets.at(k).gathered; }

std::string name(ZeroStage stage) {
  return stage == ZeroStage::kNone ? "no ZeRO" : concat("ZeRO-", static_cast<int>(stage));
}

ZeroStage zero_stage(int stage, std::string_view op) {
  if (stage < 0 || stage > 3) throw Error(std::string(op), concat("zero_stage ", stage, ": expected 0, 1, 2 or 3"));
  return static_cast<ZeroStage>(stage);
}

}  // namespace infini::parallel
