// CPU-vs-CUDA parity over the op table (op_info.h): every entry's samples run on both
// devices, forward and backward, in float64 (as registered) and cast to float32, bfloat16
// and float16; non-contiguous CUDA inputs give the CUDA result, and a second CUDA run gives
// the same bits. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "op_info.h"

namespace infini::test::cuda_parity_test {
namespace {

const Device kGpu = Device::cuda(0);

// Worst allowed |cuda - cpu| / (1 + |cpu|) for a result of `dtype`.
double tolerance(DataType dtype) {
  if (dtype == kFloat64) return 1e-9;
  if (dtype == kFloat32) return 2e-4;
  if (dtype == kBFloat16 || dtype == kFloat16) return 4e-2;
  return 0;  // integers and bools are exact
}

std::vector<double> host_values(const Tensor& t) {
  const Tensor c = t.detach().to(Device::cpu()).to(kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Inputs for one device and dtype: floating-point leaves cast to `dtype` (when given),
// moved to `device`, requires_grad kept.
TensorList prepare(const TensorList& leaves, Device device, std::optional<DataType> dtype) {
  TensorList out;
  for (const Tensor& t : leaves) {
    if (!t.defined()) {
      out.push_back(t);
      continue;
    }
    Tensor x = t.detach();
    if (dtype && is_floating_point(x.dtype())) x = x.to(*dtype);
    x = x.to(device).contiguous();
    if (x.is_same(t)) x = x.clone();
    if (t.requires_grad()) x.requires_grad_(true);
    out.push_back(x);
  }
  return out;
}

// A copy of t on its device whose last dim has stride 2 (0-d tensors are returned as is).
Tensor noncontiguous(const Tensor& t) {
  if (!t.defined() || t.dim() == 0) return t;
  Shape wide = t.shape();
  wide.push_back(2);
  Tensor storage = zeros(wide, {.dtype = t.dtype(), .device = t.device()});
  NoGradGuard no_grad;
  Tensor view = storage.select(-1, 0);
  view.copy_(t.detach());
  return view;
}

// What one run produced: the outputs and the gradients of the leaves (when differentiable).
struct DeviceRun {
  TensorList outputs, grads;
  std::string error;  // the error's op and type when the op threw
};

DeviceRun run(const OpInfo& op, const OpSample& s, const TensorList& leaves) {
  DeviceRun r;
  try {
    r.outputs = op.fn(s.view ? s.view(leaves) : leaves);
    // loss = sum_i sum(outputs[i] * w_i) with a fixed pattern w_i per output.
    Tensor loss;
    for (std::size_t i = 0; i < r.outputs.size(); ++i) {
      const Tensor& o = r.outputs[i];
      if (!o.defined() || !o.requires_grad() || !is_floating_point(o.dtype())) continue;
      const Tensor w = sample(o.shape(), -1, 1, 100 + i).to(o.dtype()).to(o.device());
      const Tensor term = sum(mul(o, w));
      loss = loss.defined() ? add(loss, term) : term;
    }
    if (loss.defined()) {
      loss.backward();
      for (const Tensor& leaf : leaves) r.grads.push_back(leaf.defined() ? leaf.grad() : Tensor());
    }
  } catch (const Error& e) {
    r.error = std::string(e.op()) + ": " + typeid(e).name();
  }
  return r;
}

// Expects `got` (CUDA) to match `want` (CPU): same shapes and dtypes, on the GPU (when
// `on_gpu`), values within the tolerance of their dtype or of `computed_in` (the inputs'
// dtype; a float64 result of float32 math carries float32 rounding), exact when `exact`;
// reports at most three elements per tensor.
void expect_match(const TensorList& got, const TensorList& want, bool exact, bool on_gpu, DataType computed_in,
                  const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].defined(), want[i].defined()) << where << " #" << i;
    if (!want[i].defined()) continue;
    ASSERT_EQ(got[i].shape(), want[i].shape()) << where << " #" << i;
    ASSERT_EQ(got[i].dtype(), want[i].dtype()) << where << " #" << i;
    if (on_gpu) ASSERT_TRUE(got[i].device().is_cuda()) << where << " #" << i << " is on " << got[i].device();
    const double tol = exact ? 0 : std::max(tolerance(want[i].dtype()), tolerance(computed_in));
    const auto a = host_values(got[i]), b = host_values(want[i]);
    int reported = 0;
    for (std::size_t k = 0; k < a.size() && reported < 3; ++k) {
      const bool same_nan = std::isnan(a[k]) && std::isnan(b[k]);
      const bool ok = same_nan || a[k] == b[k] || std::abs(a[k] - b[k]) <= tol * (1 + std::abs(b[k]));
      if (!ok) {
        ++reported;
        ADD_FAILURE() << where << " #" << i << " element " << k << ": cuda " << a[k] << " vs "
                      << (exact ? "first cuda run " : "cpu ") << b[k];
      }
    }
  }
}

// One test over all entries (one CTest case, which skips at once without a GPU); failures
// name the op, sample, dtype and check.
TEST(CudaParity, EveryOpTableEntryMatchesCpuAndRepeatsBitwise) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (const OpInfo& op : op_registry()) {
    if (op.name == "Tensor::to(device)") continue;  // moves between devices by design: see cuda_test.cpp
    std::fprintf(stderr, "parity: %s\n", op.name.c_str());  // the last line names an op that crashed
    for (const OpSample& s : op.samples()) {
      // Results belong on the GPU when some input is there (ops of no tensor, like
      // rope_frequencies, make CPU tensors).
      bool on_gpu = false;
      for (const Tensor& t : s.leaves) on_gpu = on_gpu || t.defined();
      for (std::optional<DataType> dtype :
           {std::optional<DataType>{}, std::optional{kFloat32}, std::optional{kBFloat16}, std::optional{kFloat16}}) {
        const DataType computed_in = dtype.value_or(kFloat64);
        const std::string where =
            op.name + " [" + s.label + "] " + (dtype ? std::string(name(*dtype)) : "as registered");
        const DeviceRun cpu = run(op, s, prepare(s.leaves, Device::cpu(), dtype));
        const DeviceRun gpu = run(op, s, prepare(s.leaves, kGpu, dtype));
        EXPECT_EQ(gpu.error, cpu.error) << where;
        if (!cpu.error.empty() || !gpu.error.empty()) continue;
        expect_match(gpu.outputs, cpu.outputs, false, on_gpu, computed_in, where + " forward");
        expect_match(gpu.grads, cpu.grads, false, on_gpu, computed_in, where + " gradient");

        const DeviceRun again = run(op, s, prepare(s.leaves, kGpu, dtype));
        expect_match(again.outputs, gpu.outputs, true, on_gpu, computed_in, where + " second run");
        expect_match(again.grads, gpu.grads, true, on_gpu, computed_in, where + " second run gradient");

        TensorList strided;
        for (const Tensor& t : prepare(s.leaves, kGpu, dtype)) strided.push_back(noncontiguous(t));
        NoGradGuard no_grad;
        try {
          expect_match(op.fn(s.view ? s.view(strided) : strided), gpu.outputs, false, on_gpu,
                       computed_in, where + " non-contiguous");
        } catch (const Error& e) {
          ADD_FAILURE() << where << " non-contiguous: " << e.what();
        }
      }
    }
  }
}

}  // namespace
}  // namespace infini::test::cuda_parity_test
