// Vocab-parallel cross-entropy (see vocab_cross_entropy.cppm). Row n's loss is
// log(sum_v exp(x_nv - m_n)) + m_n - x_n,target with m_n the row maximum: every rank adds its
// columns' share of the max, the sum and the target logit, and the ranks all-reduce them.
module;
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

void check_inputs(const Tensor& logits, const Tensor& targets, std::int64_t vocab_size, int ranks,
                  std::int64_t ignore_index) {
  constexpr const char* op = "vocab_parallel_cross_entropy";
  if (logits.dim() != 2 || targets.dim() != 1 || targets.size(0) != logits.size(0))
    throw ShapeError(op, concat("expected logits (N, Vl) and targets (N), got ", logits.shape(), " and ", targets.shape()));
  if (!is_floating_point(logits.dtype()))
    throw DTypeError(op, concat("logits must be floating point, got ", logits.dtype()));
  if (targets.dtype() != kInt64) throw DTypeError(op, concat("targets must be int64, got ", targets.dtype()));
  if (logits.device() != targets.device())
    throw DeviceError(op, concat("logits on ", logits.device(), " and targets on ", targets.device()));
  const std::int64_t columns = logits.size(1) * ranks;
  if (vocab_size < 1 || vocab_size > columns)
    throw ShapeError(op, concat("vocab_size ", vocab_size, " must be in [1, ", columns, "] (", ranks, " ranks x ",
                                logits.size(1), " columns)"));
  const Tensor kept = ne(targets, ignore_index);
  const Tensor bad = logical_and(kept, logical_or(lt(targets, 0), ge(targets, vocab_size)));
  if (sum(bad.to(kInt64)).item<std::int64_t>() > 0)
    throw IndexError(op, concat("targets must be in [0, ", vocab_size, ") or ignore_index ", ignore_index));
}

}  // namespace

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t vocab_size,
                                    const GroupPtr& group, std::int64_t ignore_index) {
  if (!group) throw Error("vocab_parallel_cross_entropy", "needs a process group, got null");
  check_inputs(logits, targets, vocab_size, group->size(), ignore_index);
  const std::int64_t Vl = logits.size(1), first = group->rank() * Vl;  // this rank's columns first .. first + Vl - 1
  const TensorOptions options{.dtype = logits.dtype(), .device = logits.device()};
  Tensor loss, probs, local_target, in_shard, kept, count;
  {
    NoGradGuard no_grad;
    Tensor x = logits;  // (N, Vl), padded columns -inf
    if (first + Vl > vocab_size) {
      Tensor padding = zeros({Vl}, options);
      padding.slice(0, std::max<std::int64_t>(vocab_size - first, 0)).fill_(-std::numeric_limits<double>::infinity());
      x = add(logits, padding);
    }
    Tensor row_max = amax(x, {1}).contiguous();  // (N)
    group->all_reduce(row_max, {.op = ReduceOp::Max}).wait();
    const Tensor e = exp(sub(x, row_max.unsqueeze(1)));  // (N, Vl)
    const Tensor shifted = sub(targets, first);
    in_shard = logical_and(ge(shifted, 0), lt(shifted, Vl));  // (N): the target column is here
    local_target = where(in_shard, shifted, 0);
    const Tensor target_logit = where(in_shard, gather(x, 1, local_target.unsqueeze(1)).squeeze(1), 0.0);
    Tensor sums = stack({sum(e, {1}), target_logit});  // (2, N): sum of exponentials, target logit
    group->all_reduce(sums).wait();
    probs = div(e, sums.select(0, 0).unsqueeze(1));  // (N, Vl): softmax of this rank's columns
    kept = ne(targets, ignore_index);
    const Tensor rows = where(kept, sub(add(log(sums.select(0, 0)), row_max), sums.select(0, 1)), 0.0);
    count = sum(kept.to(logits.dtype()));
    loss = div(sum(rows), count);
  }
  // d loss / d x_nv = (softmax_nv - [v = target_n]) / count for the kept rows.
  record("vocab_parallel_cross_entropy", {logits}, {loss}, {},
         [probs, local_target, in_shard, kept, count](const TensorList& g, const TensorList&) {
           if (!g[0].defined()) return TensorList{Tensor()};
           NoGradGuard no_grad;
           const Tensor columns = arange(probs.size(1), {.dtype = kInt64, .device = probs.device()}).unsqueeze(0);
           const Tensor one_hot = logical_and(eq(local_target.unsqueeze(1), columns), in_shard.unsqueeze(1));
           const Tensor row_scale = mul(kept.to(probs.dtype()), div(g[0], count)).unsqueeze(1);  // (N, 1)
           return TensorList{mul(sub(probs, one_hot.to(probs.dtype())), row_scale)};
         });
  return loss;
}

}  // namespace infini::parallel
