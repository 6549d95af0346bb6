// The multi-tensor adam_update_ (what Adam and AdamW step with): the same bits as one
// single-tensor call per parameter, over two steps, with host and capturable scalars,
// decoupled and L2 weight decay, with and without a gradient scale, on the CPU and on CUDA
// (where parameters of one dtype share launches across the kernel's 16384-element chunks
// and 48-tensor batches), and its checks (a bad parameter leaves every one unchanged).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "optim_test_util.h"

namespace infini::optim::test::optim_multi_tensor_test {
namespace {

constexpr int kParams = 220;  // more than one 48-tensor batch of the CUDA kernel per dtype

// Elements of parameter k: 3 to about 1500, and some spanning the kernel's 16384-element
// chunks (one an exact multiple of them), one empty.
std::int64_t size_of(int k) {
  switch (k) {
    case 4: return 40000;
    case 5: return 2 * 16384;
    case 6: return 40000;
    case 7: return 20000;
    case 11: return 0;
    case 120: return 16385;
    default: return 3 + 7 * k;
  }
}

// kParams parameters with their state: four dtypes in turn, one non-contiguous parameter
// and one non-contiguous gradient (updated one by one), steps 1 to 4; the same values on
// every call.
std::vector<AdamTensors> make_params(Device device, bool amsgrad) {
  constexpr DataType kDtypes[] = {kFloat32, kBFloat16, kFloat64, kFloat16};
  std::vector<AdamTensors> params;
  for (int k = 0; k < kParams; ++k) {
    const DataType dtype = kDtypes[k % 4];
    const std::int64_t n = size_of(k);
    Generator gen(100 + static_cast<std::uint64_t>(k));
    auto uniform = [&](const Shape& shape, double lo) {
      return add(rand(shape, {.dtype = kFloat64}, &gen), lo).to(dtype).to(device);
    };
    AdamTensors t{.param = k == 2 ? uniform({n, 2}, -0.5).select(1, 0) : uniform({n}, -0.5),
                  .grad = k == 9 ? uniform({n, 3}, -0.5).select(1, 1) : uniform({n}, -0.5),
                  .exp_avg = uniform({n}, -0.5),
                  .exp_avg_sq = uniform({n}, 0),
                  .max_exp_avg_sq = amsgrad ? uniform({n}, 0.5) : Tensor(),
                  .step = 1 + k % 4,
                  .device_step = full({}, static_cast<double>(1 + k % 4), {.dtype = kInt64, .device = device})};
    params.push_back(t);
  }
  return params;
}

const AdamUpdate kUpdate{.lr = 0.01, .weight_decay = 0.1, .decoupled_weight_decay = true, .grad_scale = 0.5};
const AdamUpdate kL2Update{.lr = 0.02, .weight_decay = 0.05};  // Adam's L2 decay, no gradient scale

// Every tensor the update writes, of `a` and `b`, bit for bit.
void expect_same_results(const std::vector<AdamTensors>& a, const std::vector<AdamTensors>& b, bool amsgrad,
                         const std::string& what) {
  for (int k = 0; k < kParams; ++k) {
    const std::string at = concat(what, ", parameter ", k, " (", a[k].param.dtype(), ")");
    expect_identical(a[k].param, b[k].param, at + " param");
    expect_identical(a[k].exp_avg, b[k].exp_avg, at + " exp_avg");
    expect_identical(a[k].exp_avg_sq, b[k].exp_avg_sq, at + " exp_avg_sq");
    if (amsgrad) expect_identical(a[k].max_exp_avg_sq, b[k].max_exp_avg_sq, at + " max_exp_avg_sq");
  }
}

// Two steps of the multi-tensor update of make_params(device) against one call per
// parameter of make_params(reference_device), for each of the updates above.
void check_against_single_calls(Device device, Device reference_device, bool amsgrad, bool capturable) {
  for (const AdamUpdate& base : {kUpdate, kL2Update}) {
    std::vector<AdamTensors> batched = make_params(device, amsgrad), single = make_params(reference_device, amsgrad);
    AdamUpdate update = base;
    update.amsgrad = amsgrad;
    auto scalar = [](double v, Device d) { return full({}, v, {.dtype = kFloat64, .device = d}); };
    for (int round = 0; round < 2; ++round) {
      if (capturable) {
        adam_update_(batched, update, scalar(update.lr, device), scalar(update.grad_scale, device));
        for (const AdamTensors& t : single)
          adam_update_(t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, update,
                       {.lr = scalar(update.lr, reference_device),
                        .step = t.device_step,
                        .grad_scale = scalar(update.grad_scale, reference_device)});
      } else {
        adam_update_(batched, update);
        for (const AdamTensors& t : single) {
          AdamUpdate u = update;
          u.step = t.step;
          adam_update_(t.param, t.grad, t.exp_avg, t.exp_avg_sq, t.max_exp_avg_sq, u);
        }
      }
      expect_same_results(batched, single, amsgrad,
                          concat(device, amsgrad ? " amsgrad" : "", capturable ? " capturable" : "",
                                 base.decoupled_weight_decay ? " decoupled" : " L2", ", step round ", round));
      for (std::vector<AdamTensors>* params : {&batched, &single})
        for (AdamTensors& t : *params) {
          ++t.step;
          t.device_step += 1;
        }
    }
  }
}

TEST(OptimMultiTensor, AdamEqualsOneCallPerParameter) {
  for (bool amsgrad : {false, true})
    for (bool capturable : {false, true}) check_against_single_calls(Device::cpu(), Device::cpu(), amsgrad, capturable);
}

TEST(OptimMultiTensor, AdamStepIsOneMultiTensorUpdatePerGroup) {
  // AdamW over two groups with their own options equals the multi-tensor update of each.
  const std::vector<AdamTensors> model = make_params(Device::cpu(), false);
  std::vector<Tensor> first, second;
  for (int k = 0; k < kParams; ++k) {
    const Tensor p = model[k].param.detach().clone().requires_grad_();
    p.set_grad(model[k].grad);
    (k < kParams / 2 ? first : second).push_back(p);
  }
  AdamW optimizer({{.params = first, .options = AdamWOptions{.lr = 0.01, .weight_decay = 0.1}},
                   {.params = second, .options = AdamWOptions{.lr = 0.02, .weight_decay = 0}}});
  optimizer.step();
  for (int half = 0; half < 2; ++half) {
    std::vector<AdamTensors> group;
    for (int k = half * kParams / 2; k < (half + 1) * kParams / 2; ++k) {
      const Tensor p = model[k].param.detach().clone();
      group.push_back({.param = p,
                       .grad = model[k].grad,
                       .exp_avg = zeros(p.shape(), {.dtype = p.dtype()}),
                       .exp_avg_sq = zeros(p.shape(), {.dtype = p.dtype()}),
                       .max_exp_avg_sq = Tensor(),
                       .step = 1,
                       .device_step = Tensor()});
    }
    adam_update_(group, {.lr = half == 0 ? 0.01 : 0.02,
                         .weight_decay = half == 0 ? 0.1 : 0.0,
                         .decoupled_weight_decay = true});
    const std::vector<Tensor>& params = half == 0 ? first : second;
    for (std::size_t k = 0; k < group.size(); ++k)
      expect_identical(params[k].detach(), group[k].param, concat("group ", half, ", parameter ", k));
  }
}

TEST(OptimMultiTensor, AdamChecksEveryParameterBeforeUpdatingAny) {
  const std::vector<AdamTensors> untouched = make_params(Device::cpu(), false);
  std::vector<AdamTensors> params = make_params(Device::cpu(), false);
  params[7].exp_avg = zeros({2}, {.dtype = params[7].param.dtype()});
  expect_error<ShapeError>([&] { adam_update_(params, kUpdate); }, "adam_update_", "exp_avg has shape [2]");
  params = make_params(Device::cpu(), false);
  params[44].step = 0;
  expect_error([&] { adam_update_(params, kUpdate); }, "adam_update_", "step must be >= 1, got 0");
  params[44].step = 1;
  expect_same_results(params, untouched, false, "after the refused update");
  expect_error([&] { adam_update_(params, kUpdate, Tensor(), Tensor()); }, "adam_update_", "lr is an undefined tensor");
  params = make_params(Device::cpu(), false);
  params[3].device_step = Tensor();
  const Tensor lr = full({}, 0.01, {.dtype = kFloat64}), scale = full({}, 1.0, {.dtype = kFloat64});
  expect_error([&] { adam_update_(params, kUpdate, lr, scale); }, "adam_update_", "step is an undefined tensor");
  const std::vector<AdamTensors> none;
  adam_update_(none, kUpdate);  // nothing to do
}

TEST(OptimMultiTensorCuda, AdamSharesLaunchesWithTheCpusBits) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Device gpu = Device::cuda(0);
  for (bool amsgrad : {false, true}) {
    check_against_single_calls(gpu, Device::cpu(), amsgrad, false);  // host scalars: the CPU's bits
    check_against_single_calls(gpu, gpu, amsgrad, true);             // device bias corrections
  }
}

}  // namespace
}  // namespace infini::optim::test::optim_multi_tensor_test
