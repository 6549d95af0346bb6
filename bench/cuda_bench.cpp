// One GPU's building blocks of a GPT-2 124M training step (B = 16, T = 1024, bfloat16 under
// autocast), each timed to completion (synchronize after every iteration): the linear
// layers' products with and without bias (TFLOP/s at 2 M N K per product), the tensor-core
// attention forward and forward + backward (causal, 12 heads of 64), layer norm forward and
// forward + backward on float32 rows, and the copies around them (a bias broadcast, the
// head transpose, a float32 -> bfloat16 cast; GB/s read + written), the cross-entropy over
// the vocabulary on bfloat16 logits, the backward of the q, k, v views of the fused
// projection, a residual add of a bfloat16 branch to float32 rows (read widened, and
// converted first), and AdamW over GPT-2's 148 parameters (multi-tensor, and a call per
// parameter), GELU (tanh) forward and backward on the MLP's bfloat16 activations, linear's
// weight and bias gradients (one product with the bias-gradient epilogue, or a product and a
// sum), the MLP's forward and backward (dense_gelu_dense with GELU in the epilogues, or the
// composed ops); and the launch rate of small ops, eager and replayed as a CUDA graph.
// Skipped without a GPU.
//   build/release/bin/cuda_bench --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>
import infini.nn;

using namespace infini;

namespace {

const Device kGpu = Device::cuda(0);
constexpr std::int64_t kRows = 16 * 1024;  // B * T

bool skip_without_gpu(benchmark::State& state) {
  if (cuda_device_count() > 0) return false;
  state.SkipWithError("no CUDA device");
  return true;
}

Tensor gpu_randn(const Shape& shape, DataType dtype) {
  return randn(shape, {.dtype = kFloat32, .device = kGpu}).to(dtype);
}

void set_rate(benchmark::State& state, const char* name, double per_iteration) {
  state.counters[name] = benchmark::Counter(per_iteration * static_cast<double>(state.iterations()),
                                            benchmark::Counter::kIsRate);
}

// linear(x (rows, K), W (N, K), bias (N) or none) in bfloat16.
void LinearBf16(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::int64_t k = state.range(0), n = state.range(1);
  const Tensor x = gpu_randn({kRows, k}, kBFloat16), w = gpu_randn({n, k}, kBFloat16);
  const Tensor b = state.range(2) != 0 ? gpu_randn({n}, kBFloat16) : Tensor();
  NoGradGuard no_grad;
  for (auto _ : state) {
    benchmark::DoNotOptimize(linear(x, w, b));
    synchronize(kGpu);
  }
  set_rate(state, "TFLOP/s", 2e-12 * kRows * n * k);
}

// scaled_dot_product_attention on (16, 12, 1024, 64) bfloat16, causal; range(0) = 1 adds
// the backward.
void AttentionBf16(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const bool backward = state.range(0) != 0;
  const Shape shape{16, 12, 1024, 64};
  const Tensor q = gpu_randn(shape, kBFloat16).requires_grad_(backward);
  const Tensor k = gpu_randn(shape, kBFloat16).requires_grad_(backward);
  const Tensor v = gpu_randn(shape, kBFloat16).requires_grad_(backward);
  const Tensor grad = gpu_randn(shape, kBFloat16);
  for (auto _ : state) {
    const Tensor out = scaled_dot_product_attention(q, k, v, {}, 0.0, true);
    if (backward) out.backward(grad);
    synchronize(kGpu);
  }
  // Causal: half the score matrix; 2 products forward, 5 more backward (FlashAttention-2's count).
  const double products = backward ? 7 : 2;
  set_rate(state, "TFLOP/s", 1e-12 * products * 16 * 12 * 1024.0 * 1024 * 64);
}

// layer_norm over 768 features of (rows, 768) float32; range(0) = 1 adds the backward.
void LayerNormF32(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const bool backward = state.range(0) != 0;
  const Tensor x = gpu_randn({kRows, 768}, kFloat32).requires_grad_(backward);
  const Tensor w = gpu_randn({768}, kFloat32).requires_grad_(backward);
  const Tensor b = gpu_randn({768}, kFloat32).requires_grad_(backward);
  const Tensor grad = gpu_randn({kRows, 768}, kFloat32);
  for (auto _ : state) {
    const Tensor y = layer_norm(x, {768}, w, b, 1e-5);
    if (backward) {
      y.backward(grad);
      for (const Tensor& t : {x, w, b}) t.set_grad(Tensor());  // no accumulation into old grads
    }
    synchronize(kGpu);
  }
  set_rate(state, "GB/s", 1e-9 * (backward ? 5 : 2) * 4.0 * kRows * 768);
}

// Copies: 0 a (2304) bias broadcast to (rows, 2304) bfloat16; 1 the (B, T, H, D) -> (B, H,
// T, D) transpose of bfloat16 heads; 2 a (rows, 768) float32 -> bfloat16 cast.
void Copy(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  Tensor src;
  double bytes = 0;
  switch (state.range(0)) {
    case 0:
      src = gpu_randn({2304}, kBFloat16).expand({kRows, 2304});
      bytes = 2.0 * kRows * 2304;
      break;
    case 1:
      src = gpu_randn({16, 1024, 12, 64}, kBFloat16).transpose(1, 2);
      bytes = 4.0 * kRows * 768;
      break;
    default:
      src = gpu_randn({kRows, 768}, kFloat32);
      bytes = 6.0 * kRows * 768;
  }
  NoGradGuard no_grad;
  for (auto _ : state) {
    benchmark::DoNotOptimize(state.range(0) == 2 ? src.to(kBFloat16) : src.contiguous());
    synchronize(kGpu);
  }
  set_rate(state, "GB/s", 1e-9 * bytes);
}

// Mean cross-entropy of (rows, 50304) bfloat16 logits under autocast (float32 loss, read
// as bfloat16 by the fused kernel), forward + backward: the logits read twice, their
// gradient written once.
void CrossEntropyBf16(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  constexpr std::int64_t vocab = 50304;
  const Tensor logits = gpu_randn({kRows, vocab}, kBFloat16).requires_grad_();
  const Tensor targets = randint(0, vocab, {kRows}, {.dtype = kInt64, .device = kGpu});
  for (auto _ : state) {
    Tensor loss;
    {
      AutocastGuard autocast(DeviceType::CUDA, kBFloat16);
      loss = cross_entropy(logits, targets);
    }
    loss.backward();
    logits.set_grad(Tensor());
    synchronize(kGpu);
  }
  set_rate(state, "GB/s", 1e-9 * 6.0 * kRows * vocab);
}

// The gradient of qkv (B, T, 3C) bfloat16 from those of q, k, v (B, 12, T, 64): split along
// the channels, each piece viewed as heads and transposed (GPT-2's attention input).
// range(0) = 0: three separate gradients, joined by a copy; 1: heads of one (B, T, 36, 64)
// buffer (as the attention backward writes them), joined without one.
void QkvHeadsBackwardBf16(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  constexpr std::int64_t B = 16, T = 1024, C = 768, H = 12;
  const Tensor x = gpu_randn({B, T, 3 * C}, kBFloat16).requires_grad_();
  const Tensor buffer = gpu_randn({B, T, 3 * H, C / H}, kBFloat16);
  TensorList grads;
  for (std::int64_t i = 0; i < 3; ++i)
    grads.push_back(state.range(0) != 0 ? buffer.narrow(2, i * H, H).transpose(1, 2)
                                        : gpu_randn({B, H, T, C / H}, kBFloat16));
  for (auto _ : state) {
    TensorList heads;
    for (const Tensor& part : split(mul(x, 1.0), C, 2)) heads.push_back(part.view({B, T, H, C / H}).transpose(1, 2));
    autograd::backward(heads, grads);
    x.set_grad(Tensor());
    synchronize(kGpu);
  }
  set_rate(state, "GB/s", 1e-9 * 2.0 * 2 * B * T * 3 * C);  // g in, dqkv out (mul's passes not counted)
}

// x (rows, 768) float32 + a (rows, 768) bfloat16 branch: range(0) = 0 reads the branch
// widened (as autocast's residual adds do), 1 converts it to float32 first. GB/s counts the
// widened form's traffic (4 + 2 bytes read, 4 written per element) for both.
void ResidualAddBf16(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const Tensor x = gpu_randn({kRows, 768}, kFloat32), branch = gpu_randn({kRows, 768}, kBFloat16);
  NoGradGuard no_grad;
  for (auto _ : state) {
    benchmark::DoNotOptimize(state.range(0) == 0 ? add(x, branch) : add(x, branch.to(kFloat32)));
    synchronize(kGpu);
  }
  set_rate(state, "GB/s", 1e-9 * 10.0 * kRows * 768);
}

// AdamW's update of GPT-2 124M's 148 float32 parameters (padded vocabulary): range(0) = 0
// through the multi-tensor adam_update_ (what AdamW::step runs), 1 one call per parameter.
// GB/s: parameter, grad and both moments read, parameter and moments written.
void AdamStepGpt2(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  std::vector<Shape> shapes{{50304, 768}, {1024, 768}};
  for (int layer = 0; layer < 12; ++layer)
    for (const Shape& s : std::vector<Shape>{{768}, {768}, {2304, 768}, {2304}, {768, 768}, {768}, {768}, {768},
                                             {3072, 768}, {3072}, {768, 3072}, {768}})
      shapes.push_back(s);
  shapes.insert(shapes.end(), {{768}, {768}});
  std::vector<optim::AdamTensors> params;
  double elements = 0;
  for (const Shape& s : shapes) {
    params.push_back({.param = gpu_randn(s, kFloat32),
                      .grad = gpu_randn(s, kFloat32),
                      .exp_avg = zeros(s, {.dtype = kFloat32, .device = kGpu}),
                      .exp_avg_sq = zeros(s, {.dtype = kFloat32, .device = kGpu}),
                      .max_exp_avg_sq = Tensor(),
                      .step = 1,
                      .device_step = Tensor()});
    elements += static_cast<double>(params.back().param.numel());
  }
  const optim::AdamUpdate update{.lr = 6e-4, .weight_decay = 0.1, .decoupled_weight_decay = true};
  for (auto _ : state) {
    if (state.range(0) == 0) {
      optim::adam_update_(params, update);
    } else {
      for (const optim::AdamTensors& p : params)
        optim::adam_update_(p.param, p.grad, p.exp_avg, p.exp_avg_sq, Tensor(), update);
    }
    synchronize(kGpu);
  }
  set_rate(state, "GB/s", 1e-9 * 28.0 * elements);
}

// gelu(x, tanh) on the MLP's (rows, 3072) bfloat16 activations: range(0) = 0 the forward
// alone (2 bytes read and 2 written per element), 1 the forward and the backward (2 read, 2
// written, then 4 read and 2 written).
void GeluBf16(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const bool backward = state.range(0) != 0;
  const Tensor x = gpu_randn({kRows, 3072}, kBFloat16).requires_grad_(backward);
  const Tensor grad = gpu_randn({kRows, 3072}, kBFloat16);
  for (auto _ : state) {
    const Tensor y = gelu(x, GeluApproximation::Tanh);
    if (backward) {
      y.backward(grad);
      x.set_grad(Tensor());
    }
    synchronize(kGpu);
  }
  set_rate(state, "GB/s", 1e-9 * (backward ? 10 : 4) * kRows * 3072);
}

// The weight and bias gradients of linear (rows, 768) -> (rows, 2304) in bfloat16: g^T @ x
// and g's column sums, range(0) = 0 from one product with cuBLASLt's bias-gradient epilogue
// (kernels::matmul_and_row_sums, what linear's backward runs), 1 as a product and a sum.
void WeightGradBf16(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const Tensor g = gpu_randn({kRows, 2304}, kBFloat16), x = gpu_randn({kRows, 768}, kBFloat16);
  NoGradGuard no_grad;
  for (auto _ : state) {
    if (state.range(0) == 0) {
      const auto fused = kernels::matmul_and_row_sums(g.transpose(0, 1), x);
      if (!fused) {
        state.SkipWithError("no bias-gradient epilogue for this product");
        return;
      }
    } else {
      benchmark::DoNotOptimize(kernels::matmul(g.transpose(0, 1), x));
      benchmark::DoNotOptimize(sum(g, {0}));
    }
    synchronize(kGpu);
  }
  set_rate(state, "TFLOP/s", 2e-12 * kRows * 2304 * 768);
}

// GPT-2's MLP in bfloat16, (rows, 768) -> 3072 -> 768 with tanh GELU, forward and backward:
// range(0) = 0 as dense_gelu_dense (GELU and its gradient in cuBLASLt's epilogues, what the
// model runs), 1 as linear, gelu and linear. TFLOP/s counts the six products.
void MlpBf16(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const Tensor x = gpu_randn({kRows, 768}, kBFloat16).requires_grad_();
  const Tensor w1 = gpu_randn({3072, 768}, kBFloat16).requires_grad_();
  const Tensor b1 = gpu_randn({3072}, kBFloat16).requires_grad_();
  const Tensor w2 = gpu_randn({768, 3072}, kBFloat16).requires_grad_();
  const Tensor b2 = gpu_randn({768}, kBFloat16).requires_grad_();
  const Tensor grad = gpu_randn({kRows, 768}, kBFloat16);
  for (auto _ : state) {
    const Tensor y = state.range(0) == 0 ? dense_gelu_dense(x, w1, b1, w2, b2, GeluApproximation::Tanh)
                                         : linear(gelu(linear(x, w1, b1), GeluApproximation::Tanh), w2, b2);
    benchmark::DoNotOptimize(autograd::grad({y}, {x, w1, b1, w2, b2}, {grad}));
    synchronize(kGpu);
  }
  set_rate(state, "TFLOP/s", 6 * 2e-12 * kRows * 768 * 3072);
}

// A chain of 256 small ops (multiply and add on 4096 floats) run eagerly (range(0) = 0) or
// replayed as a CUDA graph (1): op/s is the launch rate, so the difference is the host work
// per op that a graph replay saves.
void SmallOpChain(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  constexpr int kOps = 256;
  const Tensor x = gpu_randn({4096}, kFloat32);
  NoGradGuard no_grad;
  auto chain = [&x] {
    Tensor y = x;
    for (int i = 0; i < kOps / 2; ++i) y = add(mul(y, 0.5), 1.0);
    return y;
  };
  if (state.range(0) == 0) {
    for (auto _ : state) {
      benchmark::DoNotOptimize(chain());
      synchronize(kGpu);
    }
  } else {
    CudaGraph graph;
    graph.capture_begin(kGpu);
    const Tensor out = chain();
    graph.capture_end();
    for (auto _ : state) graph.replay();  // waits for the replay
  }
  set_rate(state, "op/s", kOps);
}

void timed(benchmark::internal::Benchmark* b) { b->Unit(benchmark::kMillisecond)->UseRealTime(); }

}  // namespace

BENCHMARK(LinearBf16)->Apply(timed)->ArgNames({"K", "N", "bias"})
    ->Args({768, 2304, 1})->Args({768, 2304, 0})->Args({768, 3072, 1})->Args({768, 3072, 0})
    ->Args({3072, 768, 1})->Args({768, 768, 1})->Args({768, 50304, 0});
BENCHMARK(AttentionBf16)->Apply(timed)->ArgName("backward")->Arg(0)->Arg(1);
BENCHMARK(LayerNormF32)->Apply(timed)->ArgName("backward")->Arg(0)->Arg(1);
BENCHMARK(ResidualAddBf16)->Apply(timed)->ArgName("converted")->Arg(0)->Arg(1);
BENCHMARK(AdamStepGpt2)->Apply(timed)->ArgName("per_parameter")->Arg(0)->Arg(1);
BENCHMARK(Copy)->Apply(timed)->ArgName("kind")->Arg(0)->Arg(1)->Arg(2);
BENCHMARK(CrossEntropyBf16)->Apply(timed);
BENCHMARK(GeluBf16)->Apply(timed)->ArgName("backward")->Arg(0)->Arg(1);
BENCHMARK(WeightGradBf16)->Apply(timed)->ArgName("separate_sum")->Arg(0)->Arg(1);
BENCHMARK(QkvHeadsBackwardBf16)->Apply(timed)->ArgName("one_buffer")->Arg(0)->Arg(1);
BENCHMARK(MlpBf16)->Apply(timed)->ArgName("composed")->Arg(0)->Arg(1);
BENCHMARK(SmallOpChain)->Apply(timed)->ArgName("graph")->Arg(0)->Arg(1);
BENCHMARK_MAIN();
