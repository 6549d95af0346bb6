// conv2d forward and forward + backward (input, weight and bias gradients) in float32 for
// an MNIST-sized layer: x (128, 32, 14, 14), weight (64, 32, 3, 3), padding 1. GFLOP/s counts
// 2 * N * C_out * H * W * C_in * 9 per product (one in forward, three with backward: the
// output, input and weight gradients). Also the 2x2 max pool that usually follows.
//   OMP_NUM_THREADS=2 build/release/bin/conv_bench
#include <benchmark/benchmark.h>

#include <cstdint>
import infini.autograd;

using namespace infini;

namespace {

constexpr std::int64_t kN = 128, kCin = 32, kCout = 64, kSize = 14;
constexpr double kFlops = 2.0 * kN * kCout * kSize * kSize * kCin * 9;

void set_flops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iteration * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

void Conv2dForward(benchmark::State& state) {
  const Tensor x = randn({kN, kCin, kSize, kSize}), w = randn({kCout, kCin, 3, 3}), b = randn({kCout});
  for (auto _ : state) benchmark::DoNotOptimize(conv2d(x, w, b, 1, 1));
  set_flops(state, kFlops);
}

void Conv2dForwardBackward(benchmark::State& state) {
  Tensor x = randn({kN, kCin, kSize, kSize}).requires_grad_();
  Tensor w = randn({kCout, kCin, 3, 3}).requires_grad_(), b = randn({kCout}).requires_grad_();
  const Tensor g = randn({kN, kCout, kSize, kSize});
  for (auto _ : state) {
    conv2d(x, w, b, 1, 1).backward(g);
    for (Tensor* t : {&x, &w, &b}) t->set_grad(Tensor());
  }
  set_flops(state, 3 * kFlops);
}

void MaxPool2dForwardBackward(benchmark::State& state) {
  Tensor x = randn({kN, kCout, kSize, kSize}).requires_grad_();
  const Tensor g = randn({kN, kCout, kSize / 2, kSize / 2});
  for (auto _ : state) {
    max_pool2d(x, 2).backward(g);
    x.set_grad(Tensor());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * x.nbytes() * 2);  // x, dx
}

BENCHMARK(Conv2dForward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(Conv2dForwardBackward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(MaxPool2dForwardBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
