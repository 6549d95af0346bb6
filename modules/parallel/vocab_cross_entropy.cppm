// Cross-entropy over a vocabulary split by columns over a tensor-parallel group (Megatron-LM's
// vocab_parallel_cross_entropy): no rank ever holds a whole row of logits. Three all-reduces
// per call (the row maxima, then the sums of exponentials and target logits together); the
// backward needs no communication.
export module infini.parallel:vocab_cross_entropy;
import infini.std;
import infini.tensor;
import :tp_mappings;

export namespace infini::parallel {

// logits (N, Vl) float: this rank's columns [rank Vl, (rank + 1) Vl) of S Vl, those >= vocab_size
// being padding (they take no probability); targets (N) int64 in [0, vocab_size) or
// ignore_index. -> the mean over the rows not ignored of -log softmax(row)[target] (NaN when
// every row is ignored), the same on every rank. Blocks until the collectives complete.
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t vocab_size,
                                    const GroupPtr& group, std::int64_t ignore_index = -100);

}  // namespace infini::parallel
