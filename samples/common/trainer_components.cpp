// The training run's components (see trainer_run.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "sampling.h"
#include "token_batches.h"
#include "trainer_run.h"

namespace samples {

using namespace infini;
using Clock = std::chrono::steady_clock;

Metrics::Metrics(const std::string& path) {
  if (path.empty()) return;
  out_.open(path, std::ios::app);
  if (!out_) throw IOError("train", "cannot open " + path);
}

void Metrics::line(const std::string& json) {
  if (out_.is_open()) out_ << json << '\n' << std::flush;
}

std::vector<double> every_rank(const Ranks& ranks, double value) {
  if (!ranks.world) return {value};
  Tensor t = zeros({ranks.world->size()}, TensorOptions{.dtype = kFloat64});
  t.data_ptr<double>()[ranks.rank] = value;
  ranks.world->all_reduce(t).wait();
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

void TrainerRun::export_model(const std::filesystem::path& path, ModelFormat format) const {
  const auto gathered = plan.gather_parameters();  // ZeRO-3: every rank's blocks
  if (!ranks.main_replica()) return;
  if (plan.pipelined()) {  // the stages' parts gathered on rank 0
    const nn::Named<Tensor> whole = plan.gather_stage_parameters();
    if (ranks.main()) lm.write_model(path, format, whole);
  } else {
    lm.export_model(path, format, ranks.main());
  }
}

void TrainerRun::save_adapters(const std::filesystem::path& dir) const {
  const auto gathered = plan.gather_parameters();
  if (ranks.main()) nn::lora::save_adapters(plan.module(), dir);
}

void TrainerRun::merge_adapters() const {
  if (!uses_lora(flags)) return;
  const auto gathered = plan.gather_parameters();
  nn::lora::merge(plan.module());
}

namespace {

// A JSON number, or null for NaN and infinities (which JSON has no numbers for).
std::string json_number(double value, const char* fmt = "%.7f") {
  return std::isfinite(value) ? format(fmt, value) : std::string("null");
}

// A JSON array of whole numbers.
std::string json_integers(const std::vector<double>& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(std::llround(values[i]));
  return text + "]";
}

// This process's resident memory (Linux: /proc/self/statm's second field, in pages); 0 where
// it cannot be read.
std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

// This rank's parameters (its part of the model, its tensor-parallel shards).
double parameter_count(const parallel::TrainingPlan& plan) {
  std::int64_t count = 0;
  for (const Tensor& p : plan.module().parameters()) count += p.numel();
  return static_cast<double>(count);
}

class StepLog : public TrainerComponent {
 public:
  // Collective: every rank's parameter count.
  StepLog(TrainerRun& run, std::int64_t first_step)
      : run_(run), first_step_(first_step), rank_parameters_(every_rank(run.ranks, parameter_count(run.plan))) {}

  void after_step(const StepReport& r) override {
    const Device device = run_.ranks.device;
    const double tokens_per_s = static_cast<double>(run_.tokens_per_step) / (r.ms / 1000.0);
    const std::int64_t peak = memory_stats(device).peak_allocated_bytes;
    last_loss_ = r.result.loss;
    if (r.step > first_step_ || run_.flags.num_iteration - first_step_ == 1) {  // the first step warms caches up
      total_ms_ += r.ms;
      ++timed_steps_;
    }
    if (run_.ranks.main()) {
      std::printf("step %lld/%lld | %s | loss %.4f | lr %.2e | norm %.2f | %.1f ms | %.0f tok/s | peak %.1f GiB\n",
                  static_cast<long long>(r.step), static_cast<long long>(run_.flags.num_iteration),
                  run_.layout_name.c_str(), last_loss_, r.lr, r.result.grad_norm, r.ms, tokens_per_s,
                  static_cast<double>(peak) / (1 << 30));
      std::fflush(stdout);
    }
    run_.metrics.line(format(
        "{\"step\": %lld, \"loss\": %s, \"lr\": %.6e, \"grad_norm\": %s, \"ms\": %.3f, \"tokens_per_s\": %.1f, "
        "\"peak_bytes\": %lld, \"forward_ms\": %.3f, \"backward_ms\": %.3f, \"optimizer_ms\": %.3f, "
        "\"activation_bytes\": %lld, \"allocated_bytes\": %lld, \"rss_bytes\": %lld, \"skipped\": %s}",
        static_cast<long long>(r.step), json_number(last_loss_).c_str(), r.lr,
        json_number(r.result.grad_norm, "%.6f").c_str(), r.ms, tokens_per_s, static_cast<long long>(peak),
        r.result.forward_ms, r.result.backward_ms, r.result.update_ms,
        static_cast<long long>(r.result.activation_bytes), static_cast<long long>(memory_stats(device).allocated_bytes),
        static_cast<long long>(resident_bytes()), r.result.skipped ? "true" : "false"));
  }

  // The summary: every rank's parameters (its part under pipeline parallelism) and peak bytes,
  // read before this rank's optimizer state is counted (its state_dict copies the state: read
  // after, the copies were part of the peak reported).
  void finish() override {
    const Ranks& ranks = run_.ranks;
    const Device device = ranks.device;
    const std::int64_t peak = memory_stats(device).peak_allocated_bytes;
    const std::vector<double> rank_peaks = every_rank(ranks, static_cast<double>(peak));
    std::int64_t optimizer_bytes = 0;  // this rank's optimizer state (AdamW: two moments per trained element)
    for (const auto& [name, t] : run_.plan.optimizer().state_dict())
      optimizer_bytes += t.numel() * static_cast<std::int64_t>(itemsize(t.dtype()));
    const double mean_ms = timed_steps_ > 0 ? total_ms_ / static_cast<double>(timed_steps_) : 0;
    const TrainFlags& f = run_.flags;
    run_.metrics.line(format(
        "{\"summary\": {\"layout\": \"%s\", \"steps\": %lld, \"final_loss\": %s, \"mean_ms\": %.3f, "
        "\"tokens_per_s\": %.1f, \"peak_bytes\": %lld, \"peak_bytes_max\": %lld, \"parameters\": %lld, "
        "\"rank_parameters\": %s, \"rank_peak_bytes\": %s, \"optimizer_bytes\": %lld}}",
        run_.layout_name.c_str(), static_cast<long long>(f.num_iteration), json_number(last_loss_).c_str(), mean_ms,
        mean_ms > 0 ? static_cast<double>(run_.tokens_per_step) / (mean_ms / 1000.0) : 0.0,
        static_cast<long long>(peak), std::llround(*std::max_element(rank_peaks.begin(), rank_peaks.end())),
        static_cast<long long>(run_.plan.whole_model_parameters()), json_integers(rank_parameters_).c_str(),
        json_integers(rank_peaks).c_str(), static_cast<long long>(optimizer_bytes)));
    if (ranks.main())
      std::printf("done: %s, %lld steps, mean %.1f ms/step after the first, optimizer state %lld bytes on rank 0\n",
                  run_.layout_name.c_str(), static_cast<long long>(f.num_iteration), mean_ms,
                  static_cast<long long>(optimizer_bytes));
  }

 private:
  TrainerRun& run_;
  const std::int64_t first_step_;
  const std::vector<double> rank_parameters_;  // every rank's parameters, counted before any merge
  double total_ms_ = 0, last_loss_ = 0;
  std::int64_t timed_steps_ = 0;
};

class Profiler : public TrainerComponent {
 public:
  explicit Profiler(TrainerRun& run) : run_(run) {}
  void before_step(std::int64_t step) override {
    const auto& steps = run_.flags.profile_steps;
    trace::set_recording(std::find(steps.begin(), steps.end(), step) != steps.end());
  }
  void after_step(const StepReport&) override { trace::set_recording(false); }
  // This rank's recorded events to DIR/rank_<r>.json; once every rank has written, rank 0
  // merges them into DIR/trace.json.
  void finish() override {
    const Ranks& ranks = run_.ranks;
    const std::filesystem::path root(run_.flags.profile);
    std::filesystem::create_directories(root);
    const parallel::LayoutCoord c = ranks.groups.coord;
    trace::write_chrome_file(root / concat("rank_", ranks.rank, ".json"), trace::take_events(), ranks.rank,
                             concat("rank ", ranks.rank, " (dp ", c.dp, ", tp ", c.tp, ", pp ", c.pp, ")"));
    std::vector<std::filesystem::path> files = {root / "rank_0.json"};
    if (ranks.world) {
      every_rank(ranks, 0);  // a barrier: every file is written
      for (int r = 1; r < ranks.world->size(); ++r) files.push_back(root / concat("rank_", r, ".json"));
    }
    if (!ranks.main()) return;
    trace::merge_chrome_files(files, root / "trace.json");
    std::printf("profile: %s (open it in ui.perfetto.dev or chrome://tracing)\n", (root / "trace.json").c_str());
  }

 private:
  TrainerRun& run_;
};

class NumericsDumper : public TrainerComponent {
 public:
  explicit NumericsDumper(TrainerRun& run) : run_(run), dump_(run.flags.dump_numerics, run.ranks.rank) {}
  void before_step(std::int64_t step) override { dump_.begin_step(step); }
  void after_step(const StepReport&) override { dump_.end_step(run_.plan.module().named_parameters()); }

 private:
  TrainerRun& run_;
  numerics::NumericsDump dump_;
};

// A step whose loss or gradient norm was not finite: said on stderr (rank 0); an Error once
// --max_skipped_steps of them came in a row, or when a CUDA graph applied its update anyway.
class NonFiniteGuard : public TrainerComponent {
 public:
  explicit NonFiniteGuard(TrainerRun& run) : run_(run) {}
  void after_step(const StepReport& r) override {
    const TrainFlags& f = run_.flags;
    const parallel::StepResult& result = r.result;
    if (result.skipped && !result.non_finite && run_.ranks.main())
      std::printf("step %lld: non-finite gradients, update skipped; loss scale now %g\n",
                  static_cast<long long>(r.step), run_.plan.scaler().get_scale());
    in_a_row_ = result.non_finite ? in_a_row_ + 1 : 0;
    if (!result.non_finite) return;
    const std::string what = concat("step ", r.step, ": loss ", result.loss, ", gradient norm ", result.grad_norm);
    if (!result.skipped && f.cuda_graph)
      throw Error("train", concat(what, " is not finite, and the CUDA graph's update was applied with it; stopping "
                                        "before these weights are saved"));
    if (!result.skipped) {  // --max_skipped_steps 0
      if (run_.ranks.main())
        std::fprintf(stderr, "%s is not finite; the update was applied (--max_skipped_steps 0)\n", what.c_str());
      return;
    }
    if (run_.ranks.main())
      std::fprintf(stderr, "%s is not finite: the update is skipped on every rank (%d in a row, --max_skipped_steps %d)\n",
                   what.c_str(), in_a_row_, f.max_skipped_steps);
    if (in_a_row_ >= f.max_skipped_steps)
      throw Error("train", concat(what, ": ", in_a_row_, " steps in a row had a non-finite loss or gradient norm ",
                                  "(--max_skipped_steps ", f.max_skipped_steps, "); stopping. The weights are those "
                                  "of the last finite step; no checkpoint was written from these steps"));
  }

 private:
  TrainerRun& run_;
  int in_a_row_ = 0;
};

// Every --val_loss_every steps and after the last: the mean loss of the --val_batches first
// micro-batches of the validation tokens, run on every rank of the main replica (through the
// stages under pipeline parallelism; under ZeRO-3 on every rank: a collective over dp).
class Validator : public TrainerComponent {
 public:
  explicit Validator(TrainerRun& run)
      : run_(run),
        data_(std::make_shared<llmc::TokenFile>(run.flags.input_val_bin), run.flags.sequence_length, false,
              run.flags.seed, run.lm.vocab_size) {}
  void after_step(const StepReport& r) override {
    const TrainFlags& f = run_.flags;
    if (f.val_loss_every <= 0 || (r.done % f.val_loss_every != 0 && !r.last)) return;
    if (!run_.ranks.main_replica() && f.zero_stage != 3) return;
    run_.plan.module().eval();
    std::vector<data::Example> batches;
    for (std::int64_t i = 0; i < f.val_batches; ++i) batches.push_back(data_.sequences(i * f.batch_size, f.batch_size));
    const double val_loss = run_.plan.loss(batches);
    if (run_.ranks.main()) std::printf("step %lld | val loss %.4f\n", static_cast<long long>(r.step), val_loss);
    run_.metrics.line(format("{\"step\": %lld, \"val_loss\": %.7f}", static_cast<long long>(r.step), val_loss));
  }

 private:
  TrainerRun& run_;
  TokenBatches data_;
};

// What generation starts from and prints through: an llm.c tokenizer file or a Hugging Face
// tokenizer (--tokenizer_bin / --tokenizer), or neither (ids printed as <id>).
struct SampleText {
  std::optional<llmc::TokenizerFile> llmc;
  std::optional<text::Tokenizer> hf;

  std::int64_t start_token(std::int64_t vocab_size) const {
    if (hf) return hf->document_token();
    return llmc && llmc->eot_token ? *llmc->eot_token : vocab_size - 1;
  }
  std::string decode(const std::vector<std::int64_t>& tokens) const {
    std::string text;
    for (const std::int64_t t : tokens) {
      if (hf && t >= 0 && t < hf->vocab_size())
        text += hf->token_bytes(t);
      else if (llmc && t >= 0 && t < static_cast<std::int64_t>(llmc->tokens.size()))
        text += llmc->tokens[static_cast<std::size_t>(t)];
      else
        text += "<" + std::to_string(t) + ">";
    }
    return text;
  }
};

// Every --sample_every steps and after the last: --text_length tokens from the document token.
// Every rank of the main replica samples the same tokens from the same whole logits (under
// ZeRO-3 from the parameters every data-parallel rank gathers; under a pipeline from the
// stages, the whole window each time).
class Sampler : public TrainerComponent {
 public:
  explicit Sampler(TrainerRun& run) : run_(run), rng_(run.flags.seed) {
    const TrainFlags& f = run.flags;
    if (!f.tokenizer_bin.empty()) text_.llmc = llmc::read_tokenizer_file(f.tokenizer_bin);
    if (!f.tokenizer.empty()) {
      text_.hf = text::Tokenizer::from_pretrained(f.tokenizer);
      if (text_.hf->vocab_size() > run.lm.vocab_size)  // a model's vocabulary may be padded (Qwen3's 151936)
        throw Error("train", concat("--tokenizer ", f.tokenizer, " has ", text_.hf->vocab_size(),
                                    " tokens, more than the model's vocabulary of ", run.lm.vocab_size));
    }
  }
  void after_step(const StepReport& r) override {
    const TrainFlags& f = run_.flags;
    if (f.sample_every <= 0 || (r.done % f.sample_every != 0 && !r.last)) return;
    const auto gathered = run_.plan.gather_parameters();
    if (!run_.ranks.main_replica()) return;
    run_.plan.module().eval();
    const LanguageModel& lm = run_.lm;
    parallel::TrainingPlan& plan = run_.plan;
    const Device device = run_.ranks.device;
    const CachedLogitsFn logits = [&](const Tensor& tokens, nn::KVCache& cache) {
      if (plan.pipelined()) return plan.pipeline_logits(tokens).to(kFloat32);  // no cache
      std::optional<AutocastGuard> autocast;  // --dtype bfloat16 / float16 on CUDA
      if (device.is_cuda() && f.dtype != "float32")
        autocast.emplace(DeviceType::CUDA, f.dtype == "bfloat16" ? kBFloat16 : kFloat16);
      return lm.logits_cached(tokens.to(device), cache).to(kFloat32);
    };
    std::vector<std::int64_t> tokens = {text_.start_token(lm.vocab_size)};
    generate(tokens, f.text_length, logits, lm.vocab_size, lm.max_seq_len, f.top_k, f.temperature, rng_,
             /*use_cache=*/!plan.pipelined());
    if (run_.ranks.main()) std::printf("---\n%s\n---\n", text_.decode({tokens.begin() + 1, tokens.end()}).c_str());
  }

 private:
  TrainerRun& run_;
  SampleText text_;
  Generator rng_;
};

// Every rank writes its own pieces of the state (replicated ones once) into --save every
// --save_interval steps and after the last; the checkpoint appears only once every rank's are
// written. With --async_save the files are written on a background thread and published at
// the first step boundary after they are all written (or before the next save, or at the
// end). Then the family's llm.c export (or, with LoRA, the adapters) beside it.
class Checkpointer : public TrainerComponent {
 public:
  explicit Checkpointer(TrainerRun& run) : run_(run) {}
  void after_step(const StepReport& r) override {
    const TrainFlags& f = run_.flags;
    if ((f.save_interval > 0 && r.done % f.save_interval == 0) || r.last) save(r.done);
    else if (pending_ && pending_->written_everywhere()) publish();
  }
  void finish() override {
    if (pending_) publish();
  }

 private:
  void publish() {
    pending_->commit();
    if (run_.ranks.main())
      std::printf("saved step %lld to %s\n", static_cast<long long>(pending_->step()), run_.flags.save.c_str());
    pending_.reset();
  }
  void save(std::int64_t step) {
    const TrainFlags& f = run_.flags;
    check_finite_weights(step - 1);
    if (pending_) publish();
    const auto start = Clock::now();
    if (f.async_save)
      pending_.emplace(f.save, step, run_.plan.sharded_state(run_.replicated_state), run_.ranks.world,
                       parallel::DistributedSaveOptions{.metadata = run_.metadata});
    else
      parallel::save_distributed_checkpoint(f.save, step, run_.plan.sharded_state(run_.replicated_state),
                                            run_.ranks.world, {.metadata = run_.metadata});
    const double save_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    const auto export_start = Clock::now();
    if (uses_lora(f))  // the base model is the one started from: the adapters are what changed
      run_.save_adapters(std::filesystem::path(f.save) / "adapter");
    else if (!run_.lm.llmc_name().empty())
      run_.export_model(std::filesystem::path(f.save) / run_.lm.llmc_name(), ModelFormat::kLlmc);
    const double export_ms = std::chrono::duration<double, std::milli>(Clock::now() - export_start).count();
    // How long training waited for the checkpoint (with --async_save, for the host copy).
    run_.metrics.line(format("{\"step\": %lld, \"save_ms\": %.3f, \"export_ms\": %.3f, \"async\": %s}",
                             static_cast<long long>(step), save_ms, export_ms, f.async_save ? "true" : "false"));
    if (run_.ranks.main() && !pending_) std::printf("saved step %lld to %s\n", static_cast<long long>(step), f.save.c_str());
  }
  // Error unless every parameter of every rank is finite (a collective): a checkpoint is never
  // written from NaN or infinite weights.
  void check_finite_weights(std::int64_t step) const {
    NoGradGuard no_grad;
    std::string first_bad;
    const auto gathered = run_.plan.gather_parameters();  // ZeRO-3: every rank's blocks
    for (const auto& [name, p] : run_.plan.module().named_parameters())
      if (first_bad.empty() && any(logical_or(isnan(p), isinf(p))).to(Device::cpu()).item<bool>()) first_bad = name;
    const std::vector<double> bad = every_rank(run_.ranks, first_bad.empty() ? 0.0 : 1.0);
    for (std::size_t r = 0; r < bad.size(); ++r)
      if (bad[r] != 0)
        throw Error("train", concat("after step ", step, " the weights are not finite (rank ", r,
                                    first_bad.empty() || static_cast<int>(r) != run_.ranks.rank
                                        ? std::string()
                                        : concat(": ", first_bad),
                                    "); not saving them over the last checkpoint"));
  }

  TrainerRun& run_;
  std::optional<parallel::AsyncCheckpointSave> pending_;
};

class FinalExport : public TrainerComponent {
 public:
  explicit FinalExport(TrainerRun& run) : run_(run) {}
  void finish() override {
    const TrainFlags& f = run_.flags;
    if (!f.lora_out.empty()) {
      run_.save_adapters(f.lora_out);
      if (run_.ranks.main()) std::printf("wrote the LoRA adapters to %s\n", f.lora_out.c_str());
    }
    if (!f.hf_out.empty()) {
      run_.merge_adapters();
      run_.export_model(f.hf_out, ModelFormat::kHuggingFace);
      if (run_.ranks.main()) std::printf("wrote the model to %s\n", f.hf_out.c_str());
    }
  }

 private:
  TrainerRun& run_;
};

}  // namespace

std::unique_ptr<TrainerComponent> step_log(TrainerRun& run, std::int64_t first_step) {
  return std::make_unique<StepLog>(run, first_step);
}
std::unique_ptr<TrainerComponent> profiler(TrainerRun& run) {
  return run.flags.profile.empty() ? nullptr : std::make_unique<Profiler>(run);
}
std::unique_ptr<TrainerComponent> numerics_dump(TrainerRun& run) {
  return run.flags.dump_numerics.empty() ? nullptr : std::make_unique<NumericsDumper>(run);
}
std::unique_ptr<TrainerComponent> non_finite_guard(TrainerRun& run) { return std::make_unique<NonFiniteGuard>(run); }
std::unique_ptr<TrainerComponent> validator(TrainerRun& run) {
  return run.flags.input_val_bin.empty() ? nullptr : std::make_unique<Validator>(run);
}
std::unique_ptr<TrainerComponent> sampler(TrainerRun& run) { return std::make_unique<Sampler>(run); }
std::unique_ptr<TrainerComponent> checkpointer(TrainerRun& run) {
  return run.flags.save.empty() ? nullptr : std::make_unique<Checkpointer>(run);
}
std::unique_ptr<TrainerComponent> final_export(TrainerRun& run) { return std::make_unique<FinalExport>(run); }

}  // namespace samples
