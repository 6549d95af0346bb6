// The split backward of zero-bubble pipelines on one GPT-2 (124M) block, B = 4, T = 64: the
// whole backward against its input-gradient half (autograd::backward_input, what ZB-H1's B
// step runs) and its weight-gradient half (autograd::backward_weight, the W step). The
// forward is outside the timed region.
//   build/release/bin/split_backward_bench
#include <benchmark/benchmark.h>

#include <cstdint>
import infini.nn;

using namespace infini;

namespace {

enum class Half { Whole, Input, Weight };

void BlockBackward(benchmark::State& state) {
  const auto half = static_cast<Half>(state.range(0));
  nn::GPT2Block block(768, 12);
  const Tensor x0 = randn({4, 64, 768});
  const Tensor g = randn({4, 64, 768});
  for (auto _ : state) {
    state.PauseTiming();
    Tensor x = x0.detach().requires_grad_();
    const Tensor y = block(x);
    autograd::DeferredGrads deferred;
    if (half == Half::Weight) autograd::backward_input({y}, {x}, {g}, deferred);
    state.ResumeTiming();
    switch (half) {
      case Half::Whole: y.backward(g); break;
      case Half::Input: autograd::backward_input({y}, {x}, {g}, deferred); break;
      case Half::Weight: autograd::backward_weight(deferred); break;
    }
    state.PauseTiming();
    if (half == Half::Input) autograd::backward_weight(deferred);
    block->zero_grad();
    state.ResumeTiming();
  }
}

BENCHMARK(BlockBackward)->ArgName("whole_input_weight")->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
