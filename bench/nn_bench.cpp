// Forward + backward of the nn functional hot spots at GPT-2 (124M) shapes with B = 4,
// T = 64: softmax / cross-entropy over the vocabulary, layer_norm over C = 768, the fused
// causal attention with 12 heads of 64, rope on such heads, and the backward of the views
// that take q, k, v out of the fused projection.
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

// qkv (B, T, 3C) -> q, k, v (B, 12, T, 64) through pieces along the channels, each viewed as
// heads and transposed, and back: the gradient of qkv from those of q, k, v. range(0) = 0
// takes the pieces with Tensor::slice (a view node each), 1 with split (one node whose
// backward is a cat).
void QkvHeadsBackward(benchmark::State& state) {
  constexpr std::int64_t B = 4, T = kRows / B, C = 768, H = 12;
  const bool use_split = state.range(0) != 0;
  Tensor x = randn({B, T, 3 * C}).requires_grad_();
  const TensorList grads{randn({B, H, T, C / H}), randn({B, H, T, C / H}), randn({B, H, T, C / H})};
  for (auto _ : state) {
    const Tensor qkv = mul(x, 1.0);
    const TensorList parts = use_split ? split(qkv, C, 2)
                                       : TensorList{qkv.slice(2, 0, C), qkv.slice(2, C, 2 * C), qkv.slice(2, 2 * C)};
    TensorList heads;
    for (const Tensor& part : parts) heads.push_back(part.view({B, T, H, C / H}).transpose(1, 2));
    autograd::backward(heads, grads);
    x.set_grad(Tensor());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * x.nbytes() * 2);  // g in, dqkv out
}

// rope on LLaMA-style heads (B, 12, T, 64) float32, forward + backward.
void RopeForwardBackward(benchmark::State& state) {
  const RopeFrequencies f = rope_frequencies(64, kRows / 4, 10000.0, false);
  Tensor x = randn({4, 12, kRows / 4, 64}).requires_grad_();
  const Tensor g = randn({4, 12, kRows / 4, 64});
  for (auto _ : state) {
    rope(x, f.cos, f.sin).backward(g);
    x.set_grad(Tensor());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * x.nbytes() * 4);  // x, y, g, dx
}

BENCHMARK(SoftmaxForwardBackward)->Arg(50304)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(CrossEntropyForwardBackward)->Arg(50304)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(LayerNormForwardBackward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(CausalAttentionForwardBackward)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(RopeForwardBackward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(QkvHeadsBackward)->ArgName("split")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
