// Runs every registered op table entry (see op_info.h) and checks the table is complete.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "op_info.h"

namespace infini::test {

std::vector<OpInfo>& op_registry() {
  static std::vector<OpInfo> registry;
  return registry;
}

Tensor sample(const Shape& shape, double lo, double hi, std::uint64_t seed) {
  Generator generator(seed);
  return add(mul(rand(shape, {.dtype = kFloat64}, &generator), hi - lo), lo).detach();
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = t.detach().to(Device::cpu(), kFloat64).contiguous();  // any device
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

}  // namespace infini::test

namespace infini::test::op_table_test {
namespace {

// A copy of t with the same values whose last dim has stride 2 (or, for 0-d, itself).
Tensor noncontiguous(const Tensor& t) {
  if (!t.defined() || t.dim() == 0) return t;
  Shape wide = t.shape();
  wide.push_back(2);
  Tensor storage = zeros(wide, {.dtype = t.dtype()});
  NoGradGuard no_grad;
  Tensor view = storage.select(-1, 0);
  view.copy_(t.detach());
  return view;
}

TensorList apply(const OpInfo& op, const OpSample& s, const TensorList& leaves) {
  return op.fn(s.view ? s.view(leaves) : leaves);
}

void expect_close(const TensorList& out, const TensorList& ref, double tolerance, const std::string& where) {
  ASSERT_EQ(out.size(), ref.size()) << where;
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i].shape(), ref[i].shape()) << where << " output " << i;
    const auto a = values(out[i]), b = values(ref[i]);
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (std::isnan(b[k])) {
        EXPECT_TRUE(std::isnan(a[k])) << where << " output " << i << " element " << k;
        continue;
      }
      EXPECT_LE(std::abs(a[k] - b[k]), tolerance * (1 + std::abs(b[k])))
          << where << " output " << i << " element " << k << ": " << a[k] << " vs " << b[k];
    }
  }
}

class OpTable : public ::testing::TestWithParam<std::size_t> {};

TEST(OpTableCompleteness, EveryExportedOpHasAnEntry) {
  std::set<std::string> listed;
  for (const OpInfo& op : op_registry()) listed.insert(op.name);
  const std::vector<std::string_view> names = op_names();
  for (std::string_view name : names)
    EXPECT_TRUE(listed.contains(std::string(name))) << "op '" << name << "' has no op table entry";
  const std::set<std::string> exported(names.begin(), names.end());
  for (const OpInfo& op : op_registry())
    EXPECT_TRUE(exported.contains(op.name)) << "op table entry '" << op.name << "' is not in op_names()";
}

TEST_P(OpTable, ForwardLayoutAndGradients) {
  const OpInfo& op = op_registry().at(GetParam());
  const std::vector<OpSample> samples = op.samples();
  ASSERT_FALSE(samples.empty()) << op.name;
  for (const OpSample& s : samples) {
    const std::string where = op.name + " [" + s.label + "]";
    const TensorList args = s.view ? s.view(s.leaves) : s.leaves;
    const TensorList out = op.fn(args);
    expect_close(out, op.reference(args), op.tolerance, where + " forward");

    TensorList strided;
    for (const Tensor& t : args) strided.push_back(noncontiguous(t));
    {
      NoGradGuard no_grad;
      expect_close(op.fn(strided), out, 0, where + " non-contiguous inputs");
    }
    if (op.differentiable) {
      const auto result = autograd::gradcheck([&](const TensorList& in) { return apply(op, s, in); }, s.leaves);
      EXPECT_TRUE(result.ok) << where << " gradcheck: " << result.message;
    }
    if (op.gradgrad) {
      const auto result = autograd::gradgradcheck([&](const TensorList& in) { return apply(op, s, in); }, s.leaves);
      EXPECT_TRUE(result.ok) << where << " gradgradcheck: " << result.message;
    }
  }
}

std::string entry_name(const ::testing::TestParamInfo<std::size_t>& info) {
  std::string name = op_registry().at(info.param).name;
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out + "_" + std::to_string(info.param);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTable, ::testing::Range<std::size_t>(0, op_registry().size()), entry_name);

}  // namespace
}  // namespace infini::test::op_table_test
