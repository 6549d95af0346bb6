// Memory-bound tensor kernels: copy (contiguous, transposed, with dtype conversion), fill
// and random fills. Reported as bytes moved per second (read + written).
//   build/release/bin/tensor_bench [--benchmark_filter=Copy]
#include <benchmark/benchmark.h>

#include <cstdint>
import infini.tensor;

using namespace infini;

namespace {

constexpr std::int64_t kSide = 4096;  // 16 Mi elements

void set_bytes(benchmark::State& state, const Tensor& dst, const Tensor& src) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * (dst.nbytes() + src.nbytes()));
}

void CopyContiguousF32(benchmark::State& state) {
  Tensor src = rand({kSide, kSide});
  Tensor dst = empty({kSide, kSide});
  for (auto _ : state) dst.copy_(src);
  set_bytes(state, dst, src);
}

void CopyTransposedF32(benchmark::State& state) {
  Tensor src = rand({kSide, kSide});
  Tensor dst = empty({kSide, kSide});
  for (auto _ : state) dst.copy_(src.t());
  set_bytes(state, dst, src);
}

void CastF32ToBF16(benchmark::State& state) {
  Tensor src = rand({kSide, kSide});
  Tensor dst = empty({kSide, kSide}, {.dtype = kBFloat16});
  for (auto _ : state) dst.copy_(src);
  set_bytes(state, dst, src);
}

void FillF32(benchmark::State& state) {
  Tensor dst = empty({kSide, kSide});
  for (auto _ : state) dst.fill_(1.5);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * dst.nbytes());
}

void RandnF32(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(randn({kSide, kSide}));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * kSide * kSide);
}

BENCHMARK(CopyContiguousF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(CopyTransposedF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(CastF32ToBF16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(FillF32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(RandnF32)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
