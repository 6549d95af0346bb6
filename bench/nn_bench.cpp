// Forward + backward of the nn functional hot spots at GPT-2 (124M) shapes with B = 4,
// T = 64: softmax / cross-entropy over the vocabulary, layer_norm over C = 768, and the
// fused causal attention with 12 heads of 64.
//   build/release/bin/nn_bench
#include <benchmark/benchmark.h>

#include <cstdint>
import infini.autograd;

using namespace infini;

namespace {

constexpr std::int64_t kRows = 256;  // B * T

void SoftmaxForwardBackward(benchmark::State& state) {
  const std::int64_t vocab = state.range(0);
  Tensor x = randn({kRows, vocab}).requires_grad_();
  const Tensor g = randn({kRows, vocab});
  for (auto _ : state) {
    softmax(x, 1).backward(g);
    x.set_grad(Tensor());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * x.nbytes() * 4);  // x, y, g, dx
}

void CrossEntropyForwardBackward(benchmark::State& state) {
  const std::int64_t vocab = state.range(0);
  Tensor logits = randn({kRows, vocab}).requires_grad_();
  const Tensor targets = randint(0, vocab, {kRows});
  for (auto _ : state) {
    cross_entropy(logits, targets).backward();
    logits.set_grad(Tensor());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * logits.nbytes() * 2);  // logits, dlogits
}

void LayerNormForwardBackward(benchmark::State& state) {
  Tensor x = randn({kRows, 768}).requires_grad_();
  Tensor w = ones({768}).requires_grad_(), b = zeros({768}).requires_grad_();
  const Tensor g = randn({kRows, 768});
  for (auto _ : state) {
    layer_norm(x, {768}, w, b).backward(g);
    x.set_grad(Tensor());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * x.nbytes() * 4);
}

void CausalAttentionForwardBackward(benchmark::State& state) {
  const std::int64_t T = state.range(0);
  Tensor q = randn({4, 12, T, 64}).requires_grad_(), k = randn({4, 12, T, 64}).requires_grad_(),
         v = randn({4, 12, T, 64}).requires_grad_();
  const Tensor g = randn({4, 12, T, 64});
  for (auto _ : state) {
    scaled_dot_product_attention(q, k, v, {}, 0.0, true).backward(g);
    q.set_grad(Tensor());
  }
  // Causal: about half of the 4 B H T^2 D multiply-adds forward and 8 backward.
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * 6.0 * 4 * 12 * T * T * 64 * 2 / 2,
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

BENCHMARK(SoftmaxForwardBackward)->Arg(50304)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(CrossEntropyForwardBackward)->Arg(50304)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(LayerNormForwardBackward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(CausalAttentionForwardBackward)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
