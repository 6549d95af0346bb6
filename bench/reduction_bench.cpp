// Reductions of a 4096 x 4096 float32 tensor: sum of all elements, sum and logsumexp over
// the last dim. Reported as bytes read per second (the input; the outputs are tiny).
//   build/release/bin/reduction_bench [--benchmark_filter=Sum]
#include <benchmark/benchmark.h>

#include <cstdint>
import infini.autograd;

using namespace infini;

namespace {

constexpr std::int64_t kSide = 4096;  // 16 Mi elements, 64 MiB

void set_bytes(benchmark::State& state, const Tensor& in) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * in.nbytes());
}

void SumAllF32(benchmark::State& state) {
  const Tensor x = randn({kSide, kSide});
  for (auto _ : state) benchmark::DoNotOptimize(sum(x));
  set_bytes(state, x);
}

void SumLastDimF32(benchmark::State& state) {
  const Tensor x = randn({kSide, kSide});
  for (auto _ : state) benchmark::DoNotOptimize(sum(x, {-1}));
  set_bytes(state, x);
}

void LogSumExpLastDimF32(benchmark::State& state) {
  const Tensor x = randn({kSide, kSide});
  for (auto _ : state) benchmark::DoNotOptimize(logsumexp(x, {-1}));
  set_bytes(state, x);
}

BENCHMARK(SumAllF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(SumLastDimF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(LogSumExpLastDimF32)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
