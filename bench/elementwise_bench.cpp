// Elementwise ops of infini.autograd on 16 Mi float32 elements (64 MiB per tensor, past
// every cache): a + b, a + row (a broadcast (4096) row), a += b in place (the raw kernel,
// nothing recorded), exp, GELU-tanh and its fused backward. Reported as bytes of the
// tensors read and written per second, to compare with tensor_bench's plain copy (a store
// into memory not yet in cache also reads it first, which these bytes do not count).
//   OMP_NUM_THREADS=2 build/release/bin/elementwise_bench
#include <benchmark/benchmark.h>

#include <cstdint>
import infini.autograd;

using namespace infini;

namespace {

constexpr std::int64_t kSide = 4096;
constexpr std::int64_t kTensorBytes = kSide * kSide * sizeof(float);

// `tensors` full-size tensors read or written per iteration.
void set_bytes(benchmark::State& state, std::int64_t tensors) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * tensors * kTensorBytes);
}

void AddF32(benchmark::State& state) {
  const Tensor a = rand({kSide, kSide}), b = rand({kSide, kSide});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
  set_bytes(state, 3);
}

void AddBroadcastRowF32(benchmark::State& state) {
  const Tensor a = rand({kSide, kSide}), row = rand({kSide});
  for (auto _ : state) benchmark::DoNotOptimize(add(a, row));
  set_bytes(state, 2);
}

void AddInPlaceF32(benchmark::State& state) {
  Tensor a = rand({kSide, kSide});
  const Tensor b = rand({kSide, kSide});
  for (auto _ : state) add_(a, b);
  set_bytes(state, 3);
}

void ExpF32(benchmark::State& state) {
  const Tensor a = rand({kSide, kSide});
  for (auto _ : state) benchmark::DoNotOptimize(exp(a));
  set_bytes(state, 2);
}

void GeluTanhF32(benchmark::State& state) {
  const Tensor a = randn({kSide, kSide});
  for (auto _ : state) benchmark::DoNotOptimize(gelu(a, GeluApproximation::Tanh));
  set_bytes(state, 2);
}

// y = gelu_tanh(x), then dx from dy: reads x and dy, writes dx (one fused kernel).
void GeluTanhBackwardF32(benchmark::State& state) {
  const Tensor x = randn({kSide, kSide}).requires_grad_(), dy = randn({kSide, kSide});
  const Tensor y = gelu(x, GeluApproximation::Tanh);
  for (auto _ : state) benchmark::DoNotOptimize(autograd::grad({y}, {x}, {dy}, /*retain_graph=*/true));
  set_bytes(state, 3);
}

}  // namespace

BENCHMARK(AddF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(AddBroadcastRowF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(AddInPlaceF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(ExpF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(GeluTanhF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(GeluTanhBackwardF32)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
