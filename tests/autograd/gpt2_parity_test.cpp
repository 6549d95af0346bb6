// GPT-2 composed from the library's ops (a test-local model) against llm.c's reference
// forward/backward on tests/data/gpt2-tiny: logits and loss within 1e-5, every parameter
// gradient within 1e-4; on the CPU and, when there is one, on a CUDA GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>
import infini.autograd;

namespace gpt2_parity_test {
using namespace infini;

namespace {

const std::string kDir = INFINI_TEST_DATA_DIR "/gpt2-tiny/";

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError("read_file", "cannot open " + path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// Reads n float32 values at `offset` bytes into a new tensor of `shape`.
Tensor floats(const std::vector<char>& bytes, std::size_t& offset, const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  EXPECT_LE(offset + static_cast<std::size_t>(n) * 4, bytes.size());
  Tensor t = empty(shape);
  std::memcpy(t.data_ptr(), bytes.data() + offset, static_cast<std::size_t>(n) * 4);
  offset += static_cast<std::size_t>(n) * 4;
  return t;
}

std::vector<std::int32_t> ints(const std::vector<char>& bytes, std::size_t& offset, std::size_t n) {
  std::vector<std::int32_t> v(n);
  std::memcpy(v.data(), bytes.data() + offset, n * 4);
  offset += n * 4;
  return v;
}

struct Config {
  std::int64_t max_t, vocab, layers, heads, channels, padded_vocab;
};

// Parameter shapes in llm.c's checkpoint order.
std::vector<Shape> parameter_shapes(const Config& c) {
  const std::int64_t C = c.channels, L = c.layers;
  return {{c.padded_vocab, C}, {c.max_t, C}, {L, C},         {L, C},     {L, 3 * C, C}, {L, 3 * C},
          {L, C, C},           {L, C},       {L, C},         {L, C},     {L, 4 * C, C}, {L, 4 * C},
          {L, C, 4 * C},       {L, C},       {C},            {C}};
}

// The model on `device` (the files read on the CPU, moved; results compared on the CPU).
void expect_reference_forward_and_backward(Device device) {
  const std::vector<char> model = read_file(kDir + "model.bin");
  std::size_t at = 0;
  const std::vector<std::int32_t> header = ints(model, at, 256);
  ASSERT_EQ(header[0], 20240326);
  ASSERT_EQ(header[1], 3);
  const Config c{header[2], header[3], header[4], header[5], header[6], header[7]};
  std::vector<Tensor> p;
  for (const Shape& s : parameter_shapes(c)) p.push_back(floats(model, at, s).to(device).requires_grad_());
  ASSERT_EQ(at, model.size());

  const std::vector<char> state = read_file(kDir + "debug_state.bin");
  at = 0;
  const std::vector<std::int32_t> sheader = ints(state, at, 256);
  ASSERT_EQ(sheader[0], 20240327);
  const std::int64_t B = sheader[2], T = sheader[3], C = c.channels, NH = c.heads, V = c.vocab;
  const auto inputs = ints(state, at, static_cast<std::size_t>(B * T));
  const auto targets = ints(state, at, static_cast<std::size_t>(B * T));
  const Tensor expected_logits = floats(state, at, {B, T, V});
  const Tensor expected_loss = floats(state, at, {1});

  // Forward: embeddings, L pre-norm blocks (causal attention + GELU-tanh MLP), tied head.
  const Tensor idx = from_vector(std::vector<std::int64_t>(inputs.begin(), inputs.end())).to(device);
  const Tensor pos = arange(T, {.dtype = kInt64, .device = device});
  Tensor x = add(index_select(p[0], 0, idx).view({B, T, C}), index_select(p[1], 0, pos));
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const Tensor h1 = layer_norm(x, {C}, p[2].select(0, l), p[3].select(0, l));
    const Tensor qkv = linear(h1, p[4].select(0, l), p[5].select(0, l));  // (B, T, 3C)
    auto heads = [&](std::int64_t part) {  // (B, NH, T, C/NH)
      return qkv.narrow(2, part * C, C).view({B, T, NH, C / NH}).transpose(1, 2);
    };
    const Tensor att = scaled_dot_product_attention(heads(0), heads(1), heads(2), {}, 0.0, true);
    x = add(x, linear(att.transpose(1, 2).reshape({B, T, C}), p[6].select(0, l), p[7].select(0, l)));
    const Tensor h2 = layer_norm(x, {C}, p[8].select(0, l), p[9].select(0, l));
    const Tensor fc = gelu(linear(h2, p[10].select(0, l), p[11].select(0, l)), GeluApproximation::Tanh);
    x = add(x, linear(fc, p[12].select(0, l), p[13].select(0, l)));
  }
  const Tensor logits = matmul(layer_norm(x, {C}, p[14], p[15]), p[0].t()).narrow(2, 0, V);  // (B, T, V)
  const Tensor loss = cross_entropy(logits.reshape({B * T, V}),
                                    from_vector(std::vector<std::int64_t>(targets.begin(), targets.end())).to(device));
  ASSERT_EQ(loss.device(), device);

  const Tensor logit_error = amax(abs(sub(logits.to(Device::cpu()), expected_logits)));
  EXPECT_LT(logit_error.item<double>(), 1e-5);
  EXPECT_NEAR(loss.item<double>(), expected_loss.item<double>(), 1e-5);

  loss.backward();
  const std::vector<std::string> names = {"wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                                          "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
  for (std::size_t i = 0; i < p.size(); ++i) {
    const Tensor expected = floats(state, at, p[i].shape());
    ASSERT_TRUE(p[i].grad().defined()) << names[i];
    EXPECT_LT(amax(abs(sub(p[i].grad().to(Device::cpu()), expected))).item<double>(), 1e-4) << names[i];
  }
  EXPECT_EQ(at, state.size());
}

TEST(GPT2Parity, ForwardAndBackwardMatchTheReference) { expect_reference_forward_and_backward(Device::cpu()); }

TEST(GPT2ParityCuda, ForwardAndBackwardMatchTheReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  expect_reference_forward_and_backward(Device::cuda(0));
}

}  // namespace

}  // namespace gpt2_parity_test
