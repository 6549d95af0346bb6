// The precision checker inside models (module paths from label_modules) and --dump_numerics'
// files: exact statistics of module outputs and parameter gradients per step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

import infini.nn;

namespace infini::nn::numerics_module_test {
namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "expected \"" << part << "\" in\n" << text;
}

GPT2Config tiny() {
  return {.max_seq_len = 8, .vocab_size = 10, .padded_vocab_size = 12, .num_layers = 2, .num_heads = 2, .channels = 8};
}

TEST(NumericsModules, LabelsAreThePathsOfNamedModules) {
  GPT2 model(tiny());
  EXPECT_EQ(model->h[1]->mlp->c_fc->label(), "");  // not labelled yet
  model->label_modules();
  EXPECT_EQ(model->label(), "");
  EXPECT_EQ(model->h[1]->mlp->c_fc->label(), "h.1.mlp.c_fc");
  EXPECT_EQ(model->h[0]->attn->c_attn->label(), "h.0.attn.c_attn");
}

// An infinite weight in block 1's q/k/v projection: the forward error names that Linear (not
// the attention, block or model around it) and the op.
TEST(NumericsModules, ForwardErrorNamesTheModulePath) {
  const numerics::CheckNumericsGuard checking;
  GPT2 model(tiny());
  model->label_modules();
  {
    const NoGradGuard no_grad;
    model->h[1]->attn->c_attn->weight.slice(0, 0, 1).slice(1, 0, 1).fill_(std::numeric_limits<float>::infinity());
  }
  const Tensor idx = from_vector<std::int64_t>({1, 2, 3, 4}, {1, 4});
  const std::string message = error_of([&] { model(idx); });
  expect_contains(message, "check_numerics: op 'linear' (forward) in module h.1.attn.c_attn (Linear): output 0 is "
                           "float32 [1, 4, 24]: ");
  expect_contains(message, "inputs: 0: float32 [1, 4, 8]: ");
  expect_contains(message, "1: float32 [24, 8]: ");
  expect_contains(message, "(0 NaN, 1 Inf of 192)");  // the weight
}

// y = sqrt(x): finite at 0, its gradient is not.
class SqrtLayerImpl : public Module {
 public:
  SqrtLayerImpl() : Module("SqrtLayer") {}
  Tensor forward(const Tensor& x) override { return sqrt(x); }
};

class HolderImpl : public Module {
 public:
  HolderImpl() : Module("Holder") { inner = register_module("inner", std::make_shared<SqrtLayerImpl>()); }
  Tensor forward(const Tensor& x) override { return (*inner)(x); }
  std::shared_ptr<SqrtLayerImpl> inner;
};

TEST(NumericsModules, BackwardErrorNamesWhereTheForwardRan) {
  const numerics::CheckNumericsGuard checking;
  auto holder = std::make_shared<HolderImpl>();
  holder->label_modules();
  const Tensor x = from_vector<float>({0, 1}, {2}).requires_grad_();
  const Tensor y = (*holder)(x);
  expect_contains(error_of([&] { sum(y).backward(); }),
                  "op 'sqrt' (backward, SqrtBackward) in module inner (SqrtLayer): gradient 0 is float32 [2]: min 0.5 "
                  "max 0.5 mean 0.5 (0 NaN, 1 Inf of 2)");
}

std::vector<std::vector<std::string>> read_tsv(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream cellsin(line);
    for (std::string cell; std::getline(cellsin, cell, '\t');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

// y = x * 2 + 1 through a labelled Linear (weight 2, bias 1): the dump holds each step's module
// outputs and parameter gradients with exact statistics.
TEST(NumericsModules, DumpWritesEveryModuleOutputAndGradientPerStep) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "infini_numerics_dump_test";
  std::filesystem::remove_all(dir);
  Sequential model(Linear(1, 1), Linear(1, 1));
  for (const Tensor& p : model->parameters()) {
    const NoGradGuard no_grad;
    Tensor(p).fill_(p.dim() == 2 ? 2.0 : 1.0);
  }
  model->label_modules();
  {
    numerics::NumericsDump dump(dir, 3);
    EXPECT_EQ(dump.path(), dir / "rank_3.tsv");
    EXPECT_NE(error_of([&] { numerics::NumericsDump second(dir, 4); }).find("is already active"), std::string::npos);
    for (std::int64_t step = 0; step < 2; ++step) {
      dump.begin_step(step);
      model->zero_grad();
      const Tensor x = from_vector<float>({1, -1, 3}, {3, 1});
      sum(model(x)).backward();  // 2x + 1 = {3, -1, 7}; then {7, -1, 15}
      dump.end_step(model->named_parameters());
    }
  }
  EXPECT_FALSE(numerics::dumping());
  const auto rows = read_tsv(dir / "rank_3.tsv");
  ASSERT_EQ(rows.size(), 1u + 2 * (3 + 4));  // header; per step 3 module outputs and 4 gradients
  EXPECT_EQ(rows[0], (std::vector<std::string>{"step", "kind", "name", "dtype", "shape", "numel", "nan", "inf", "min",
                                               "max", "mean", "rms"}));
  // The inner modules' outputs come before the Sequential's (they finish first).
  EXPECT_EQ(rows[1], (std::vector<std::string>{"0", "forward", "0", "float32", "[3, 1]", "3", "0", "0", "-1", "7", "3",
                                               "4.43471157"}));  // sqrt((9 + 1 + 49) / 3)
  EXPECT_EQ(rows[2][2], "1");
  EXPECT_EQ(rows[2][9], "15");
  EXPECT_EQ(rows[3][2], "Sequential");  // the unlabelled root is named by its type
  // d sum / d w2 = sum of the first layer's outputs = 9; d sum / d w1 = w2 * sum(x) = 6.
  EXPECT_EQ(rows[4], (std::vector<std::string>{"0", "grad", "0.weight", "float32", "[1, 1]", "1", "0", "0", "6", "6",
                                               "6", "6"}));
  EXPECT_EQ(rows[6][2], "1.weight");
  EXPECT_EQ(rows[6][8], "9");
  EXPECT_EQ(rows[8][0], "1");  // the second step
  std::filesystem::remove_all(dir);
}

TEST(NumericsModules, DumpToAnUnwritableDirectoryNamesIt) {
  const std::string message = error_of([] { numerics::NumericsDump dump("/proc/infini_cannot_write", 0); });
  expect_contains(message, "NumericsDump: cannot write \"/proc/infini_cannot_write/rank_0.tsv\"");
  EXPECT_FALSE(numerics::dumping());
}

}  // namespace
}  // namespace infini::nn::numerics_module_test
