// Module: registration, the tree walks, modes, conversion, state dicts, clone, hooks and
// the containers, on small test-local modules with known values.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

import infini.nn;

namespace infini::nn::module_test {
namespace {

template <class E, class F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// y = x * scale + shift, with a call counter as a buffer.
class AffineImpl : public Cloneable<AffineImpl> {
 public:
  explicit AffineImpl(std::int64_t n) : Cloneable("Affine"), n(n) { reset(); }
  void reset() override {
    scale = register_parameter("scale", full({n}, 2.0));
    shift = register_parameter("shift", zeros({n}));
    calls = register_buffer("calls", zeros({1}));
  }
  Tensor forward(const Tensor& x) override {
    add_(calls, ones({1}));
    return add(mul(x, scale), shift);
  }
  std::int64_t n;
  Tensor scale, shift, calls;

 protected:
  std::string extra_repr() const override { return concat("n=", n); }
};
using Affine = ModuleHolder<AffineImpl>;

// Two affines in sequence, registered as children.
class TwoImpl : public Cloneable<TwoImpl> {
 public:
  TwoImpl() : Cloneable("Two") { reset(); }
  void reset() override {
    first = register_module("first", Affine(3));
    second = register_module("second", Affine(3));
  }
  Tensor forward(const Tensor& x) override { return second(first(x)); }
  Affine first{1}, second{1};
};
using Two = ModuleHolder<TwoImpl>;

std::vector<std::string> names(const Named<Tensor>& list) {
  std::vector<std::string> out;
  for (const auto& [name, t] : list) out.push_back(name);
  return out;
}

TEST(Module, NamedParametersBuffersAndModulesInRegistrationOrder) {
  Two model;
  EXPECT_EQ(names(model->named_parameters()),
            (std::vector<std::string>{"first.scale", "first.shift", "second.scale", "second.shift"}));
  EXPECT_EQ(names(model->named_buffers()), (std::vector<std::string>{"first.calls", "second.calls"}));
  EXPECT_TRUE(model->named_parameters(false).empty());
  EXPECT_EQ(model->parameters().size(), 4u);
  EXPECT_EQ(model->children().size(), 2u);
  std::vector<std::string> module_names;
  for (const auto& [name, m] : model->named_modules()) module_names.push_back(name + ":" + m->type_name());
  EXPECT_EQ(module_names, (std::vector<std::string>{":Two", "first:Affine", "second:Affine"}));
  EXPECT_TRUE(model->parameters()[0].requires_grad());
  EXPECT_FALSE(model->buffers()[0].requires_grad());
}

TEST(Module, ForwardComputesThroughChildrenAndParametersGetGradients) {
  Two model;
  const Tensor x = from_vector<float>({1, 2, 3}, {3});
  const Tensor y = model(x);  // (x * 2) * 2
  EXPECT_EQ(y.to(kFloat64).data_ptr<double>()[2], 12.0);
  sum(y).backward();
  // d/d first.scale = x * second.scale = 2x
  const Tensor g = model->first->scale.grad().to(kFloat64);
  EXPECT_EQ(g.data_ptr<double>()[0], 2.0);
  EXPECT_EQ(g.data_ptr<double>()[2], 6.0);
  EXPECT_EQ(model->first->calls.to(kFloat64).item().to<double>(), 1.0);
  model->zero_grad(false);
  EXPECT_EQ(model->first->scale.grad().to(kFloat64).data_ptr<double>()[2], 0.0);
  model->zero_grad();
  EXPECT_FALSE(model->first->scale.grad().defined());
}

TEST(Module, RegistrationErrors) {
  Affine a(2);
  expect_error<Error>([&] { a->register_parameter("scale", zeros({1})); }, "already registered");
  expect_error<Error>([&] { a->register_buffer("a.b", zeros({1})); }, "no '.'");
  expect_error<Error>([&] { a->register_parameter("", zeros({1})); }, "non-empty");
  expect_error<Error>([&] { a->register_parameter("w", Tensor()); }, "undefined");
  expect_error<Error>([&] { a->register_module("m", std::shared_ptr<AffineImpl>()); }, "null");
  expect_error<Error>([] { ModuleHolder<AffineImpl> h(std::shared_ptr<AffineImpl>{}); }, "null");
  ModuleList list;
  expect_error<Error>([&] { list(zeros({1})); }, "ModuleList");
}

TEST(Module, TrainEvalReachesEveryModule) {
  Two model;
  EXPECT_TRUE(model->first->is_training());
  model->eval();
  EXPECT_FALSE(model->is_training());
  EXPECT_FALSE(model->second->is_training());
  model->train();
  EXPECT_TRUE(model->second->is_training());
}

TEST(Module, ToDTypeConvertsInPlaceKeepingHandlesAndGrads) {
  Two model;
  const Tensor scale = model->first->scale;  // a second handle
  sum(model(ones({3}))).backward();
  model->to(kFloat64);
  EXPECT_EQ(scale.dtype(), kFloat64);
  EXPECT_EQ(model->first->calls.dtype(), kFloat64);
  EXPECT_TRUE(scale.requires_grad());
  ASSERT_TRUE(scale.grad().defined());
  EXPECT_EQ(scale.grad().dtype(), kFloat64);
  EXPECT_EQ(scale.grad().data_ptr<double>()[0], 2.0);
  const Tensor y = model(ones({3}, {.dtype = kFloat64}));
  EXPECT_EQ(y.dtype(), kFloat64);
  expect_error<DTypeError>([&] { model->to(kInt64); }, "floating-point");
}

TEST(Module, StateDictRoundTripAndErrors) {
  Two a, b;
  {
    NoGradGuard no_grad;
    a->first->scale.copy_(from_vector<float>({5, 6, 7}, {3}));
  }
  const StateDict state = a->state_dict();
  EXPECT_EQ(state.size(), 6u);
  ASSERT_TRUE(state.contains("first.calls"));
  b->load_state_dict(state);
  EXPECT_EQ(b->first->scale.to(kFloat64).data_ptr<double>()[1], 6.0);
  // b's tensors are its own: changing a does not change b.
  {
    NoGradGuard no_grad;
    a->first->scale.fill_(0);
  }
  EXPECT_EQ(b->first->scale.to(kFloat64).data_ptr<double>()[1], 6.0);

  StateDict missing = state;
  missing.erase("second.shift");
  missing["extra.weight"] = zeros({1});
  expect_error<Error>([&] { b->load_state_dict(missing); }, "missing keys [second.shift], unexpected keys [extra.weight]");
  b->load_state_dict(missing, /*strict=*/false);  // loads what matches

  StateDict bad_shape = state;
  bad_shape["first.scale"] = zeros({4});
  expect_error<ShapeError>([&] { b->load_state_dict(bad_shape); }, "first.scale");
  StateDict bad_dtype = state;
  bad_dtype["first.scale"] = zeros({3}, {.dtype = kFloat64});
  expect_error<DTypeError>([&] { b->load_state_dict(bad_dtype); }, "first.scale");
}

TEST(Module, CloneIsDeep) {
  Two a;
  {
    NoGradGuard no_grad;
    a->second->shift.fill_(1.5);
  }
  a->first->scale.requires_grad_(false);
  a->eval();
  auto copy = std::dynamic_pointer_cast<TwoImpl>(a->clone());
  ASSERT_TRUE(copy);
  EXPECT_FALSE(copy->is_training());
  EXPECT_FALSE(copy->first->scale.requires_grad());
  EXPECT_EQ(copy->second->shift.to(kFloat64).data_ptr<double>()[0], 1.5);
  // The copy's members point at the copy's own children and tensors.
  EXPECT_EQ(copy->second.ptr(), copy->named_children()[1].second);
  EXPECT_NE(copy->second->shift.data_ptr<float>(), a->second->shift.data_ptr<float>());
  {
    NoGradGuard no_grad;
    copy->second->shift.fill_(-1);
  }
  EXPECT_EQ(a->second->shift.to(kFloat64).data_ptr<double>()[0], 1.5);

  class Plain : public Module {
   public:
    Plain() : Module("Plain") {}
  };
  expect_error<Error>([] { std::make_shared<Plain>()->clone(); }, "Cloneable");
}

TEST(Module, ForwardHooksSeeInputsAndMayReplaceTheOutput) {
  Affine a(2);
  std::vector<double> seen;
  const int pre = a->register_forward_pre_hook([&](Module& m, const TensorList& in) {
    EXPECT_EQ(m.type_name(), "Affine");
    seen.push_back(in[0].to(kFloat64).data_ptr<double>()[0]);
  });
  const int post = a->register_forward_hook([&](Module&, const TensorList&, Tensor& out) { out = mul(out, 10.0); });
  const Tensor y = a(ones({2}));
  EXPECT_EQ(seen, std::vector<double>{1.0});
  EXPECT_EQ(y.to(kFloat64).data_ptr<double>()[0], 20.0);
  a->remove_hook(pre);
  a->remove_hook(post);
  EXPECT_EQ(a(ones({2})).to(kFloat64).data_ptr<double>()[0], 2.0);
  EXPECT_EQ(seen.size(), 1u);
}

TEST(Containers, SequentialChainsAndClones) {
  Sequential seq(Affine(2), Affine(2));
  EXPECT_EQ(seq->size(), 2u);
  EXPECT_EQ(names(seq->named_parameters())[2], "1.scale");
  EXPECT_EQ(seq(ones({2})).to(kFloat64).data_ptr<double>()[1], 4.0);
  auto copy = std::dynamic_pointer_cast<SequentialImpl>(seq->clone());
  EXPECT_EQ((*copy)(ones({2})).to(kFloat64).data_ptr<double>()[1], 4.0);
  EXPECT_NE((*copy)[0], (*seq)[0]);
  expect_error<IndexError>([&] { (*seq)[2]; }, "out of range");
  EXPECT_EQ(seq->str(), "Sequential(\n  (0): Affine(n=2)\n  (1): Affine(n=2)\n)");
}

TEST(Containers, ModuleListAndDict) {
  ModuleList list(Affine(1));
  list->push_back(Affine(2).ptr());
  EXPECT_EQ(list->at<AffineImpl>(1)->n, 2);
  expect_error<Error>([&] { list->at<SequentialImpl>(0); }, "Affine");

  ModuleDict dict;
  dict->insert("double", Affine(1).ptr());
  dict->insert("residual", Residual(Affine(1)).ptr());
  EXPECT_EQ(dict->keys(), (std::vector<std::string>{"double", "residual"}));
  EXPECT_EQ(dict("double", ones({1})).to(kFloat64).item().to<double>(), 2.0);
  EXPECT_EQ(dict("residual", ones({1})).to(kFloat64).item().to<double>(), 3.0);  // x + 2x
  expect_error<IndexError>([&] { dict("missing", ones({1})); }, "keys: [double, residual]");
  EXPECT_EQ(names(dict->named_parameters())[2], "residual.block.scale");
}

}  // namespace
}  // namespace infini::nn::module_test
