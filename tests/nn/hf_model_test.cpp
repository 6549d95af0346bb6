// Hugging Face GPT-2 and LLaMA-3 directories. The reference is tests/nn/hf_reference.py, an independent
// writer that follows transformers' conventions (names, Conv1D transposition, tied head, shards),
// run on gpt2-tiny's llm.c checkpoint. hf::read_gpt2 gives that checkpoint's tensors exactly
// (float32) or rounded once (bfloat16, float16), single-file or sharded, with or without the
// "transformer." prefix and old files' buffers, and the model built from them gives the llm.c
// model's logits; hf::write_gpt2 writes the reference's tensors bit for bit and round-trips;
// each kind of bad directory fails with an error naming the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <numbers>
#include <string>
#include <vector>
#include <unistd.h>

#include "data_test_util.h"

import infini.nn;

namespace infini::hf_model_test {
namespace {

namespace fs = std::filesystem;

const fs::path kModel = fs::path(INFINI_TEST_DATA_DIR) / "gpt2-tiny" / "model.bin";
const fs::path kScript = fs::path(INFINI_TEST_DATA_DIR).parent_path() / "nn" / "hf_reference.py";

// A new empty directory's path under the temporary directory (removed by the caller).
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / concat("infini_hf_", name, "_", ::getpid());
  fs::remove_all(dir);
  return dir;
}

// hf_reference.py's directory for gpt2-tiny, written with `flags`.
fs::path reference_dir(const std::string& name, const std::string& flags = "") {
  const fs::path dir = fresh_dir(name);
  const std::string command = concat("python3 '", kScript.string(), "' '", kModel.string(), "' '", dir.string(), "' ", flags);
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return dir;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<std::size_t>(x.nbytes())) == 0;
}

// got's config and tensors are want's, each rounded to `dtype` once; wte's first V rows (the
// padded rows must be zeros).
void expect_checkpoint(const llmc::GPT2Checkpoint& got, const llmc::GPT2Checkpoint& want, DataType dtype,
                       const std::string& what) {
  const llmc::GPT2Config &g = got.config, &w = want.config;
  EXPECT_TRUE(g.max_seq_len == w.max_seq_len && g.vocab_size == w.vocab_size &&
              g.padded_vocab_size == w.padded_vocab_size && g.num_layers == w.num_layers &&
              g.num_heads == w.num_heads && g.channels == w.channels)
      << what << ": the config";
  ASSERT_EQ(got.tensors.size(), want.tensors.size()) << what;
  for (std::size_t i = 0; i < want.tensors.size(); ++i) {
    const auto& [name, expected] = want.tensors[i];
    ASSERT_EQ(got.tensors[i].first, name) << what;
    Tensor actual = got.tensors[i].second, reference = expected.to(dtype).to(kFloat32);
    ASSERT_EQ(actual.dtype(), kFloat32) << what << ": " << name;
    if (name == "wte") {
      const std::int64_t V = w.vocab_size, pad = w.padded_vocab_size - V;
      EXPECT_TRUE(same_bits(actual.narrow(0, V, pad), zeros({pad, w.channels}))) << what << ": wte's padded rows";
      actual = actual.narrow(0, 0, V);
      reference = reference.narrow(0, 0, V);
    }
    EXPECT_TRUE(same_bits(actual, reference)) << what << ": " << name;
  }
}

int shard_files(const fs::path& dir) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir)) count += entry.path().filename().string().starts_with("model-");
  return count;
}

TEST(HFModel, ReadsTransformersGPT2Directories) {
  const llmc::GPT2Checkpoint want = llmc::read_gpt2_checkpoint(kModel);
  struct Case {
    std::string name, flags;
    DataType dtype;
    bool sharded;
  };
  for (const Case& c : std::vector<Case>{
           {"single", "", kFloat32, false},
           {"sharded", "--shard_bytes 100000", kFloat32, true},
           {"bfloat16", "--dtype bfloat16", kBFloat16, false},
           {"float16_old_names", "--dtype float16 --shard_bytes 150000 --no_prefix --buffers", kFloat16, true}}) {
    const fs::path dir = reference_dir(c.name, c.flags);
    EXPECT_EQ(shard_files(dir) > 1, c.sharded) << c.name;
    expect_checkpoint(hf::read_gpt2(dir), want, c.dtype, c.name);
    fs::remove_all(dir);
  }
}

TEST(HFModel, ModelFromADirectoryGivesTheLlmcModelsLogits) {
  const fs::path dir = reference_dir("logits", "--shard_bytes 100000");
  nn::GPT2 from_llmc(nn::GPT2Config::from_llmc(llmc::read_gpt2_checkpoint(kModel).config));
  from_llmc->load_llmc_tensors(llmc::read_gpt2_checkpoint(kModel).tensors);
  const std::shared_ptr<nn::Module> loaded = nn::load_pretrained(dir);
  auto from_hf = std::dynamic_pointer_cast<nn::GPT2Impl>(loaded);
  ASSERT_NE(from_hf, nullptr) << loaded->type_name();
  EXPECT_EQ(from_hf->config, from_llmc->config);
  const Tensor idx = randint(0, 500, {2, 16}, {.dtype = kInt64});
  NoGradGuard no_grad;
  const Tensor a = from_llmc(idx), b = (*from_hf)(idx);
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_LE(max(abs(sub(a, b))).item<double>(), 1e-5);

  // save_pretrained writes what hf::write_gpt2 writes of the same tensors, bit for bit.
  const fs::path saved = fresh_dir("saved"), direct = fresh_dir("direct");
  nn::save_pretrained(*loaded, saved);
  hf::write_gpt2(direct, {.config = from_llmc->config.to_llmc(), .tensors = from_llmc->llmc_tensors()});
  const StateDict x = io::load_safetensors(saved / "model.safetensors").tensors,
                  y = io::load_safetensors(direct / "model.safetensors").tensors;
  ASSERT_EQ(x.size(), y.size());
  for (const auto& [name, t] : x) EXPECT_TRUE(y.contains(name) && same_bits(t, y.at(name))) << name;

  // Refusals: another model_type, another module, a model with LoRA adapters.
  std::ofstream(saved / "config.json") << R"({"model_type": "bert"})";
  data::test::expect_error<IOError>([&] { nn::load_pretrained(saved); }, "nn::load_pretrained",
                                    "model_type \"bert\" is not supported");
  nn::Linear linear(2, 2);
  data::test::expect_error<Error>([&] { nn::save_pretrained(*linear, saved); }, "nn::save_pretrained",
                                  "expected a model of a registered family (gpt2, llama3, qwen3), got Linear");
  nn::lora::apply(*loaded, {.targets = {"c_attn"}});
  data::test::expect_error<Error>([&] { nn::save_pretrained(*loaded, saved); }, "nn::save_pretrained",
                                  "has LoRA adapters: merge them first");
  for (const fs::path& d : {dir, saved, direct}) fs::remove_all(d);
}

TEST(HFModel, WritesWhatTransformersWritesAndRoundTrips) {
  const llmc::GPT2Checkpoint want = llmc::read_gpt2_checkpoint(kModel);
  const fs::path ours = fresh_dir("ours"), reference = reference_dir("reference");
  hf::write_gpt2(ours, want);
  const StateDict written = io::load_safetensors(ours / "model.safetensors").tensors,
                  expected = io::load_safetensors(reference / "model.safetensors").tensors;
  ASSERT_EQ(written.size(), expected.size());
  for (const auto& [name, tensor] : expected) {
    ASSERT_TRUE(written.contains(name)) << name;
    EXPECT_TRUE(same_bits(written.at(name), tensor)) << name;
  }
  expect_checkpoint(hf::read_gpt2(ours), want, kFloat32, "written as float32");
  // Sharded in bfloat16 into the same directory: the single file goes, the shards come.
  hf::write_gpt2(ours, want, {.dtype = kBFloat16, .max_shard_bytes = 60000});
  EXPECT_FALSE(fs::exists(ours / "model.safetensors"));
  EXPECT_TRUE(fs::exists(ours / "model.safetensors.index.json"));
  EXPECT_GT(shard_files(ours), 2);
  expect_checkpoint(hf::read_gpt2(ours), want, kBFloat16, "written as bfloat16 shards");
  hf::write_gpt2(ours, want, {.dtype = kFloat16});
  EXPECT_FALSE(fs::exists(ours / "model.safetensors.index.json"));
  expect_checkpoint(hf::read_gpt2(ours), want, kFloat16, "written as float16");
  EXPECT_THROW(hf::write_gpt2(ours, want, {.dtype = kInt32}), DTypeError);
  fs::remove_all(ours);
  fs::remove_all(reference);
}

std::string text_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// `text` with its first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

// hf::read_gpt2(dir) fails with an IOError naming the directory and containing `message`.
void expect_refused(const fs::path& dir, const std::string& message) {
  try {
    hf::read_gpt2(dir);
    ADD_FAILURE() << "read: " << message;
  } catch (const IOError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(concat("hf::read_gpt2: '", dir.string(), "': ")), std::string::npos) << what;
    EXPECT_NE(what.find(message), std::string::npos) << what;
  }
}

TEST(HFModel, BadDirectoriesNameTheProblem) {
  const fs::path dir = reference_dir("bad");
  const fs::path weights = dir / "model.safetensors", config = dir / "config.json";
  const StateDict good = io::load_safetensors(weights).tensors;
  const std::string good_config = text_of(config);
  const auto with_weights = [&](const std::function<void(StateDict&)>& edit, const std::string& message) {
    StateDict tensors = good;
    edit(tensors);
    io::save_safetensors(weights, tensors);
    expect_refused(dir, message);
    io::save_safetensors(weights, good);
  };
  with_weights([](StateDict& t) { t.erase("transformer.h.1.mlp.c_fc.bias"); },
               "the weights do not match config.json's GPT-2: missing transformer.h.1.mlp.c_fc.bias");
  with_weights([](StateDict& t) { t["transformer.ln_f.bias"] = zeros({65}); },
               "misshapen transformer.ln_f.bias is [65], expected [64]");
  with_weights([](StateDict& t) { t["transformer.h.0.attn.extra"] = zeros({2}); },
               "unexpected transformer.h.0.attn.extra");
  with_weights([](StateDict& t) { t["transformer.wpe.weight"] = t["transformer.wpe.weight"].to(kInt32); },
               "not float32, bfloat16 or float16: transformer.wpe.weight (int32)");
  with_weights([](StateDict& t) { t["lm_head.weight"] = mul(t["transformer.wte.weight"], 2.0); },
               "lm_head.weight differs from wte: an untied head, which Infini's GPT-2 does not have");
  const auto with_config = [&](const std::string& text, const std::string& message) {
    write_text(config, text);
    expect_refused(dir, message);
    write_text(config, good_config);
  };
  with_config(replaced(good_config, "\"n_inner\": null", "\"n_inner\": 100"),
              "config.json: \"n_inner\" is 100; Infini's model needs null or 4 n_embd = 256");
  with_config(replaced(good_config, "\"n_layer\": 2,", ""), "config.json has no \"n_layer\"");
  with_config(replaced(good_config, "\"model_type\": \"gpt2\"", "\"model_type\": \"llama\""),
              "config.json: \"model_type\" is \"llama\"; Infini's model needs \"gpt2\"");
  with_config("[1, 2]", "config.json is not a JSON object");
  fs::remove(weights);
  expect_refused(dir, "holds neither model.safetensors nor model.safetensors.index.json");
  fs::remove_all(dir);

  // A sharded directory (wte alone in shard 1; wpe, then layer 0's first tensors in shard 2)
  // whose index maps a tensor to another shard than the one holding it.
  const fs::path sharded = reference_dir("bad_index", "--shard_bytes 100000");
  const fs::path index = sharded / "model.safetensors.index.json";
  const std::string text = text_of(index);
  write_text(index, replaced(text, "\"transformer.wpe.weight\": \"model-00002-of-",
                             "\"transformer.wpe.weight\": \"model-00003-of-"));
  expect_refused(sharded, "model-00002-of-00007.safetensors holds 'transformer.wpe.weight', which "
                          "model.safetensors.index.json maps to \"model-00003-of-00007.safetensors\"");
  write_text(index, replaced(text, "\"transformer.wte.weight\": \"model-00001-of-",
                             "\"transformer.wte.weight\": \"model-00002-of-"));
  expect_refused(sharded, "model.safetensors.index.json maps 'transformer.wte.weight' to "
                          "model-00002-of-00007.safetensors, which does not hold it");
  write_text(index, replaced(text, "\"transformer.wte.weight\": \"model-00001-of-", "\"transformer.wte.weight\": \"../x"));
  expect_refused(sharded, "maps 'transformer.wte.weight' to \"../x");
  fs::remove_all(sharded);
}

// A random tiny LLaMA-3 (grouped-query heads, scaled RoPE, random norm weights) as an llm.c
// checkpoint, and hf_reference.py's LlamaForCausalLM directories of it, untied (one file) and
// tied (sharded): hf::read_llama3 gives the checkpoint's tensors exactly (q_proj and k_proj
// back from rotate-half order), the models built from both give the same logits, and
// hf::write_llama3 writes the reference's tensors bit for bit.
TEST(HFModel, LLaMA3DirectoriesRoundTripThroughTheLlmcLayout) {
  manual_seed(3);
  const nn::LLaMA3Config config{.max_seq_len = 16, .vocab_size = 37, .num_layers = 2, .num_heads = 4,
                                .num_kv_heads = 2, .channels = 16, .ffn_dim_multiplier = 1.3f, .multiple_of = 8,
                                .norm_eps = 1e-5f, .rope_theta = 500000.0f, .use_scaled_rope = true};
  nn::LLaMA3 model(config);
  llmc::LLaMA3Checkpoint want{.config = config.to_llmc(), .tensors = model->llmc_tensors()};
  for (auto& [name, tensor] : want.tensors)
    if (name == "ln1w" || name == "ln2w" || name == "lnfw") tensor = add(randn(tensor.shape()), 1.0);
  const fs::path work = fresh_dir("llama");
  fs::create_directories(work);
  for (const bool tied : {false, true}) {
    const std::string what = tied ? "tied" : "untied";
    if (tied) want.tensors.back().second = want.tensors.front().second.clone();  // wlmhead = wte
    const fs::path file = work / concat(what, ".bin"), reference = work / concat(what, "_reference"),
                   ours = work / concat(what, "_ours");
    llmc::write_llama3_checkpoint(file, want);
    const std::string command = concat("python3 '", kScript.string(), "' '", file.string(), "' '", reference.string(),
                                       "'", tied ? " --tie --shard_bytes 20000" : "");
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    EXPECT_EQ(fs::exists(reference / "model.safetensors.index.json"), tied) << what;

    const llmc::LLaMA3Checkpoint got = hf::read_llama3(reference);
    EXPECT_EQ(llmc::llama3_ffn_hidden_dim(got.config), llmc::llama3_ffn_hidden_dim(want.config)) << what;
    EXPECT_TRUE(got.config.num_kv_heads == 2 && got.config.use_scaled_rope && got.config.norm_eps == 1e-5f &&
                got.config.rope_theta == 500000.0f && got.config.max_seq_len == 16)
        << what;
    ASSERT_EQ(got.tensors.size(), want.tensors.size());
    for (std::size_t i = 0; i < want.tensors.size(); ++i) {
      EXPECT_EQ(got.tensors[i].first, want.tensors[i].first);
      EXPECT_TRUE(same_bits(got.tensors[i].second, want.tensors[i].second)) << what << ": " << want.tensors[i].first;
    }
    nn::LLaMA3 from_llmc(nn::LLaMA3Config::from_llmc(want.config));
    from_llmc->load_llmc_tensors(want.tensors);
    const auto from_hf = std::dynamic_pointer_cast<nn::LLaMA3Impl>(nn::load_pretrained(reference));
    ASSERT_NE(from_hf, nullptr) << what;
    const Tensor idx = randint(0, 37, {2, 9}, {.dtype = kInt64});
    {
      NoGradGuard no_grad;
      EXPECT_LE(max(abs(sub(from_llmc(idx), (*from_hf)(idx)))).item<double>(), 1e-5) << what;
    }
    // A tied directory gives a tied model: one weight (no lm_head), whose gradient is the
    // embedding's plus the head's (an untied copy's two), and save_pretrained writes it tied.
    EXPECT_EQ(from_hf->lm_head == nullptr, tied) << what;
    EXPECT_EQ(from_hf->tied_parameters().size(), tied ? 1u : 0u) << what;
    if (tied) {
      const Tensor targets = randint(0, 37, {2, 9}, {.dtype = kInt64});
      from_llmc->loss(from_llmc(idx), targets).backward();
      from_hf->loss((*from_hf)(idx), targets).backward();
      const Tensor both = add(from_llmc->wte->weight.grad(), from_llmc->lm_head->weight.grad());
      EXPECT_LE(max(abs(sub(from_hf->wte->weight.grad(), both))).item<double>(), 1e-6) << what;
      EXPECT_GT(max(abs(from_llmc->lm_head->weight.grad())).item<double>(), 1e-3) << what;
      nn::save_pretrained(*from_hf, work / "tied_saved");
      EXPECT_FALSE(io::load_safetensors(work / "tied_saved" / "model.safetensors").tensors.contains("lm_head.weight"));
      EXPECT_NE(text_of(work / "tied_saved" / "config.json").find("\"tie_word_embeddings\": true"), std::string::npos);
    }

    hf::write_llama3(ours, want, {.max_shard_bytes = tied ? 20000 : std::int64_t{5'000'000'000}});
    StateDict written, expected;
    for (const auto& [dir, out] : {std::pair{ours, &written}, std::pair{reference, &expected}})
      for (const auto& entry : fs::directory_iterator(dir))
        if (entry.path().extension() == ".safetensors")
          for (auto& [name, tensor] : io::load_safetensors(entry.path()).tensors) out->emplace(name, tensor);
    ASSERT_EQ(written.size(), expected.size()) << what;
    EXPECT_EQ(written.contains("lm_head.weight"), !tied) << what;
    for (const auto& [name, tensor] : expected) {
      ASSERT_TRUE(written.contains(name)) << what << ": " << name;
      EXPECT_TRUE(same_bits(written.at(name), tensor)) << what << ": " << name;
    }
    EXPECT_NE(text_of(ours / "config.json").find(concat("\"tie_word_embeddings\": ", tied ? "true" : "false")),
              std::string::npos)
        << what;
  }
  // LLaMA-3.2's RoPE scaling (factor 32): read, used by the RoPE table, written back; llm.c's
  // header cannot hold it.
  const fs::path reference = work / "tied_reference";
  const std::string config_text = text_of(reference / "config.json");
  write_text(reference / "config.json", replaced(config_text, "\"factor\": 8.0", "\"factor\": 32.0"));
  const llmc::LLaMA3Checkpoint llama32 = hf::read_llama3(reference);
  EXPECT_EQ(llama32.config.rope_scaling.factor, 32.0);
  EXPECT_EQ(llama32.config.rope_scaling.original_context, 8192);
  const auto scaled32 = std::dynamic_pointer_cast<nn::LLaMA3Impl>(nn::load_pretrained(reference));
  ASSERT_NE(scaled32, nullptr);
  // hd 4, theta 500000: freq[1] = 500000^-1/2 has wavelength 4443, in the blended band
  // [8192 / 4, 8192 / 1]: smooth = (8192 / 4443 - 1) / (4 - 1), freq (1 - smooth) f / 32 + smooth f.
  const double f1 = 1 / std::sqrt(500000.0), smooth = (8192 / (2 * std::numbers::pi / f1) - 1) / 3;
  EXPECT_NEAR(scaled32->rope_table->inverse_frequencies[1], (1 - smooth) * f1 / 32 + smooth * f1, 1e-15);
  EXPECT_EQ(scaled32->rope_table->inverse_frequencies[0], 1.0);  // wavelength 2 pi: kept
  hf::write_llama3(work / "llama32_ours", llama32);
  EXPECT_NE(text_of(work / "llama32_ours" / "config.json").find("\"factor\": 32.0"), std::string::npos);
  try {
    llmc::write_llama3_checkpoint(work / "llama32.bin", llama32);
    ADD_FAILURE() << "wrote a RoPE scaling of factor 32 into llm.c's header";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("RoPE scaling factor 32"), std::string::npos) << e.what();
  }
  write_text(reference / "config.json", replaced(config_text, "\"low_freq_factor\": 1.0", "\"low_freq_factor\": 4.0"));
  try {
    hf::read_llama3(reference);
    ADD_FAILURE() << "read a RoPE scaling whose low and high frequency factors are equal";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("low_freq_factor < high_freq_factor"), std::string::npos) << e.what();
  }
  fs::remove_all(work);
}

}  // namespace
}  // namespace infini::hf_model_test
