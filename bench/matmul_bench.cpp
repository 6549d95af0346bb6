// Matrix products in float32, reported as GFLOP/s (2*M*N*K per product): 1024^3, the
// GPT-2 (124M) layer shapes M x K x N with M = B*T = 256 (qkv 768->2304, fc 768->3072,
// proj 3072->768, lm head 768->50304), and the transposed operands linear uses: its forward
// x @ W^T reads W (N,K) transposed, its weight gradient g^T @ x reads g (K,M) transposed
// (at the layer shapes and at the weight gradients' own shapes, whose depth is B*T).
// Also linear with bias, a batch of small products (attention-sized), bfloat16 operands on
// AMX tiles (set_float32_matmul_precision(kMedium)) and float64, and
// FmaPeak: the FP32 FMA peak of the same threads, measured now (on a shared VM it moves).
// Repeated runs report mean, median and max; max is the best repetition's GFLOP/s.
//   OMP_NUM_THREADS=2 build/release/bin/matmul_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>
import infini.autograd;

using namespace infini;

namespace {

void set_flops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iteration * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

// 24 independent chains of 16-wide FMAs (enough to fill both FMA ports through their
// latency), `steps` steps each; returns a value so nothing is optimized away.
__attribute__((target("avx512f"))) float fma_chains(std::int64_t steps) {
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (std::int64_t s = 0; s < steps; ++s)
    for (auto& a : acc) a = _mm512_fmadd_ps(a, x, y);
  __m512 sum = acc[0];
  for (int i = 1; i < 24; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return _mm512_reduce_add_ps(sum);
}

void FmaPeak(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("FmaPeak needs AVX-512");
    return;
  }
  constexpr std::int64_t kSteps = 1 << 20;
  int threads = 1;
  for (auto _ : state) {
#pragma omp parallel
    {
      benchmark::DoNotOptimize(fma_chains(kSteps));
#pragma omp single
      threads = omp_get_num_threads();
    }
  }
  set_flops(state, 2.0 * 16 * 24 * kSteps * threads);
}

// (M,K) @ (K,N), both row-major.
void Matmul(benchmark::State& state) {
  const std::int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Tensor a = randn({m, k}), b = randn({k, n});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  set_flops(state, 2.0 * m * n * k);
}

// x (M,K) @ W^T with W (N,K): linear's forward (W read column-major, in place).
void MatmulTransposedB(benchmark::State& state) {
  const std::int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Tensor x = randn({m, k}), w = randn({n, k});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(x, w.t()));
  set_flops(state, 2.0 * m * n * k);
}

// g^T @ x with g (K,M): a weight gradient (g read column-major, in place).
void MatmulTransposedA(benchmark::State& state) {
  const std::int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Tensor g = randn({k, m}), x = randn({k, n});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(g.t(), x));
  set_flops(state, 2.0 * m * n * k);
}

// linear(x (B,T,K), W (N,K), bias (N)) with B*T = M: the bias is the GEMM's C.
void Linear(benchmark::State& state) {
  const std::int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Tensor x = randn({4, m / 4, k}), w = randn({n, k}), bias = randn({n});
  for (auto _ : state) benchmark::DoNotOptimize(linear(x, w, bias));
  set_flops(state, 2.0 * m * n * k);
}

// (B, T, D) @ (B, D, T): attention scores of 4 sequences x 12 heads, one product per thread.
void BmmSmall(benchmark::State& state) {
  const std::int64_t batch = state.range(0), t = state.range(1), d = state.range(2);
  const Tensor q = randn({batch, t, d}), k = randn({batch, d, t});
  for (auto _ : state) benchmark::DoNotOptimize(bmm(q, k));
  set_flops(state, 2.0 * batch * t * t * d);
}

// Float32 products under set_float32_matmul_precision(kMedium): bfloat16 operands on AMX
// tiles (x @ W^T, linear's forward), where the CPU has them.
void MatmulMediumTransposedB(benchmark::State& state) {
  if (!has_bfloat16_matmul()) {
    state.SkipWithError("no AMX-BF16 here");
    return;
  }
  const std::int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Tensor x = randn({m, k}), w = randn({n, k});
  set_float32_matmul_precision(MatmulPrecision::kMedium);
  for (auto _ : state) benchmark::DoNotOptimize(matmul(x, w.t()));
  set_float32_matmul_precision(MatmulPrecision::kHighest);
  set_flops(state, 2.0 * m * n * k);
}

void MatmulF64(benchmark::State& state) {
  const std::int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Tensor a = randn({m, k}, {.dtype = kFloat64}), b = randn({k, n}, {.dtype = kFloat64});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  set_flops(state, 2.0 * m * n * k);
}

double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

void timed(benchmark::internal::Benchmark* b) {
  b->Unit(benchmark::kMillisecond)->UseRealTime()->ComputeStatistics("max", max_of);
}

void gpt2_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "K", "N"});
  b->Args({1024, 1024, 1024});
  b->Args({256, 768, 2304});
  b->Args({256, 768, 3072});
  b->Args({256, 3072, 768});
  b->Args({256, 768, 50304});
  timed(b);
}

// The input gradients of those layers: (B*T, out) @ (out, in), W read row-major.
void gpt2_input_gradient_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "K", "N"});
  b->Args({256, 2304, 768});
  b->Args({256, 3072, 768});
  b->Args({256, 768, 3072});
  b->Args({256, 50304, 768});
  timed(b);
}

// The weight gradients of those layers: (out, B*T) @ (B*T, in), a depth of only 256.
void gpt2_weight_gradient_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "K", "N"});
  b->Args({2304, 256, 768});
  b->Args({3072, 256, 768});
  b->Args({768, 256, 3072});
  b->Args({50304, 256, 768});
  timed(b);
}

// The demo's LM head (1024 tokens, 256 channels): forward x @ W^T, input gradient g @ W,
// weight gradient g^T @ x.
void demo_head(benchmark::internal::Benchmark* b, std::int64_t m, std::int64_t k, std::int64_t n) {
  b->ArgNames({"M", "K", "N"})->Args({m, k, n});
  timed(b);
}

BENCHMARK(FmaPeak)->Apply(timed);
BENCHMARK(Matmul)->Apply(gpt2_shapes);
BENCHMARK(Matmul)->Apply(gpt2_input_gradient_shapes);
BENCHMARK(MatmulTransposedB)->Apply(gpt2_shapes);
BENCHMARK(MatmulTransposedA)->Apply(gpt2_shapes);
BENCHMARK(MatmulTransposedA)->Apply(gpt2_weight_gradient_shapes);
BENCHMARK(MatmulTransposedB)->Apply([](auto* b) { demo_head(b, 1024, 256, 50304); });
BENCHMARK(Matmul)->Apply([](auto* b) { demo_head(b, 1024, 50304, 256); });
BENCHMARK(MatmulTransposedA)->Apply([](auto* b) { demo_head(b, 50304, 1024, 256); });
BENCHMARK(Linear)->ArgNames({"M", "K", "N"})->Args({256, 768, 2304})->Apply(timed);
BENCHMARK(BmmSmall)->ArgNames({"B", "T", "D"})->Args({48, 64, 64})->Apply(timed);
BENCHMARK(MatmulMediumTransposedB)->Apply(gpt2_shapes);
BENCHMARK(MatmulF64)->ArgNames({"M", "K", "N"})->Args({1024, 1024, 1024})->Apply(timed);

}  // namespace

BENCHMARK_MAIN();
