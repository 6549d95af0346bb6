// LR schedulers (see lr_scheduler.cppm): the shared stepping and state dict, then each
// scheduler's closed form.
module;
#include <cmath>
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::optim {
namespace {

// The values of a small state tensor as float64.
std::vector<double> as_reals(const Tensor& t) {
  const Tensor host = t.to(Device::cpu(), kFloat64).contiguous();
  const double* data = host.data_ptr<double>();
  return std::vector<double>(data, data + host.numel());
}

}  // namespace

// ---- LRScheduler ----

LRScheduler::LRScheduler(std::string name, Optimizer& optimizer, std::vector<double> base_lrs)
    : name_(std::move(name)), optimizer_(optimizer), base_lrs_(std::move(base_lrs)) {
  if (base_lrs_.empty())
    for (std::size_t g = 0; g < optimizer.num_param_groups(); ++g) base_lrs_.push_back(optimizer.lr(g));
  if (base_lrs_.size() != optimizer.num_param_groups())
    throw Error(name_, concat("got ", base_lrs_.size(), " base lrs for ", optimizer.num_param_groups(), " param groups"));
}

void LRScheduler::initial_step() { set_lrs(0); }

void LRScheduler::step() { set_lrs(last_epoch_ + 1); }

void LRScheduler::set_lrs(std::int64_t step) {
  std::vector<double> lrs(base_lrs_.size());
  for (std::size_t g = 0; g < lrs.size(); ++g) lrs[g] = lr_at(g, step);  // may throw: nothing changed yet
  for (std::size_t g = 0; g < lrs.size(); ++g) optimizer_.set_lr(g, lrs[g]);
  last_epoch_ = step;
  last_lr_ = std::move(lrs);
}

StateDict LRScheduler::state_dict() const {
  StateDict out;
  StateWriter writer(out, "");
  writer.integer("last_epoch", last_epoch_);
  writer.reals("base_lrs", base_lrs_);
  writer.reals("last_lr", last_lr_);
  write_hyperparameters(out, "");
  return out;
}

void LRScheduler::load_state_dict(const StateDict& state) {
  const std::string op = name_ + ".load_state_dict";
  StateReader reader(op, "", state);
  const std::int64_t last_epoch = reader.integer("last_epoch");
  if (last_epoch < 0) throw IndexError(op, concat("last_epoch must be >= 0, got ", last_epoch));
  const auto groups = static_cast<std::int64_t>(optimizer_.num_param_groups());
  std::vector<double> base_lrs = reader.reals("base_lrs", groups);
  std::vector<double> last_lr = reader.reals("last_lr", groups);
  StateDict mine;
  write_hyperparameters(mine, "");
  for (const auto& [key, value] : mine) {
    const std::vector<double> saved = as_reals(reader.tensor(key)), own = as_reals(value);
    if (saved != own)
      throw Error(op, concat("\"", key, "\" is ", value.str(), " in this scheduler but ",
                             reader.tensor(key).str(), " in the state dict (build it with the same arguments)"));
  }
  reader.finish();
  last_epoch_ = last_epoch;
  base_lrs_ = std::move(base_lrs);
  last_lr_ = std::move(last_lr);
}

// ---- ConstantLR ----

ConstantLR::ConstantLR(Optimizer& optimizer, double factor, std::int64_t total_iters)
    : LRScheduler("ConstantLR", optimizer), factor_(factor), total_iters_(total_iters) {
  if (!(factor >= 0 && factor <= 1)) throw Error(name(), concat("factor must be in [0, 1], got ", factor));
  if (total_iters < 0) throw Error(name(), concat("total_iters must be >= 0, got ", total_iters));
  initial_step();
}

double ConstantLR::lr_at(std::size_t group, std::int64_t step) const {
  return base_lrs()[group] * (step < total_iters_ ? factor_ : 1.0);
}

void ConstantLR::write_hyperparameters(StateDict& out, const std::string& prefix) const {
  StateWriter w(out, prefix);
  w.real("factor", factor_);
  w.integer("total_iters", total_iters_);
}

// ---- StepLR ----

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler("StepLR", optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size < 1) throw Error(name(), concat("step_size must be >= 1, got ", step_size));
  if (!(gamma >= 0)) throw Error(name(), concat("gamma must be >= 0, got ", gamma));
  initial_step();
}

double StepLR::lr_at(std::size_t group, std::int64_t step) const {
  return base_lrs()[group] * std::pow(gamma_, static_cast<double>(step / step_size_));
}

void StepLR::write_hyperparameters(StateDict& out, const std::string& prefix) const {
  StateWriter w(out, prefix);
  w.integer("step_size", step_size_);
  w.real("gamma", gamma_);
}

// ---- MultiStepLR ----

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma)
    : LRScheduler("MultiStepLR", optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  if (!(gamma >= 0)) throw Error(name(), concat("gamma must be >= 0, got ", gamma));
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

double MultiStepLR::lr_at(std::size_t group, std::int64_t step) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), step) - milestones_.begin();
  return base_lrs()[group] * std::pow(gamma_, static_cast<double>(passed));
}

void MultiStepLR::write_hyperparameters(StateDict& out, const std::string& prefix) const {
  StateWriter w(out, prefix);
  w.integers("milestones", milestones_);
  w.real("gamma", gamma_);
}

// ---- ExponentialLR ----

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler("ExponentialLR", optimizer), gamma_(gamma) {
  if (!(gamma >= 0)) throw Error(name(), concat("gamma must be >= 0, got ", gamma));
  initial_step();
}

double ExponentialLR::lr_at(std::size_t group, std::int64_t step) const {
  return base_lrs()[group] * std::pow(gamma_, static_cast<double>(step));
}

void ExponentialLR::write_hyperparameters(StateDict& out, const std::string& prefix) const {
  StateWriter(out, prefix).real("gamma", gamma_);
}

// ---- LinearLR ----

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, std::int64_t total_iters)
    : LRScheduler("LinearLR", optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  if (!(start_factor > 0 && start_factor <= 1))
    throw Error(name(), concat("start_factor must be in (0, 1], got ", start_factor));
  if (!(end_factor >= 0 && end_factor <= 1)) throw Error(name(), concat("end_factor must be in [0, 1], got ", end_factor));
  if (total_iters < 1) throw Error(name(), concat("total_iters must be >= 1, got ", total_iters));
  initial_step();
}

double LinearLR::lr_at(std::size_t group, std::int64_t step) const {
  const double progress = static_cast<double>(std::min(step, total_iters_)) / static_cast<double>(total_iters_);
  return base_lrs()[group] * (start_factor_ + (end_factor_ - start_factor_) * progress);
}

void LinearLR::write_hyperparameters(StateDict& out, const std::string& prefix) const {
  StateWriter w(out, prefix);
  w.real("start_factor", start_factor_);
  w.real("end_factor", end_factor_);
  w.integer("total_iters", total_iters_);
}

// ---- CosineAnnealingLR ----

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min)
    : LRScheduler("CosineAnnealingLR", optimizer), T_max_(T_max), eta_min_(eta_min) {
  if (T_max < 1) throw Error(name(), concat("T_max must be >= 1, got ", T_max));
  if (!(eta_min >= 0)) throw Error(name(), concat("eta_min must be >= 0, got ", eta_min));
  initial_step();
}

double CosineAnnealingLR::lr_at(std::size_t group, std::int64_t step) const {
  const double cosine = std::cos(std::numbers::pi * static_cast<double>(step) / static_cast<double>(T_max_));
  return eta_min_ + (base_lrs()[group] - eta_min_) * (1 + cosine) / 2;
}

void CosineAnnealingLR::write_hyperparameters(StateDict& out, const std::string& prefix) const {
  StateWriter w(out, prefix);
  w.integer("T_max", T_max_);
  w.real("eta_min", eta_min_);
}

// ---- cosine with warmup ----

double cosine_with_warmup(double base_lr, std::int64_t step, std::int64_t warmup_steps, std::int64_t total_steps,
                          double min_lr) {
  if (step < warmup_steps) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const double decay = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps));
  return min_lr + (base_lr - min_lr) * 0.5 * (1 + std::cos(std::numbers::pi * decay));
}

CosineWithWarmupLR::CosineWithWarmupLR(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t total_steps,
                                       double min_lr)
    : LRScheduler("CosineWithWarmupLR", optimizer), warmup_steps_(warmup_steps), total_steps_(total_steps), min_lr_(min_lr) {
  if (warmup_steps < 0 || total_steps <= warmup_steps)
    throw Error(name(), concat("need 0 <= warmup_steps < total_steps, got warmup_steps ", warmup_steps, ", total_steps ",
                               total_steps));
  if (!(min_lr >= 0)) throw Error(name(), concat("min_lr must be >= 0, got ", min_lr));
  initial_step();
}

double CosineWithWarmupLR::lr_at(std::size_t group, std::int64_t step) const {
  return cosine_with_warmup(base_lrs()[group], step, warmup_steps_, total_steps_, min_lr_);
}

void CosineWithWarmupLR::write_hyperparameters(StateDict& out, const std::string& prefix) const {
  StateWriter w(out, prefix);
  w.integer("warmup_steps", warmup_steps_);
  w.integer("total_steps", total_steps_);
  w.real("min_lr", min_lr_);
}

// ---- OneCycleLR ----

namespace {

// One max lr per group: `max_lrs` as given, or its single entry repeated.
std::vector<double> per_group(std::vector<double> max_lrs, const Optimizer& optimizer) {
  const std::size_t groups = optimizer.num_param_groups();
  if (max_lrs.size() == 1) max_lrs.assign(groups, max_lrs[0]);
  if (max_lrs.size() != groups)
    throw Error("OneCycleLR", concat("got ", max_lrs.size(), " max lrs for ", groups, " param groups"));
  for (double lr : max_lrs)
    if (!(lr > 0 && std::isfinite(lr))) throw Error("OneCycleLR", concat("max_lr must be finite and > 0, got ", lr));
  return max_lrs;
}

std::vector<double> divided(std::vector<double> values, double divisor) {
  for (double& v : values) v /= divisor;
  return values;
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, std::int64_t total_steps,
                       OneCycleLROptions options)
    : LRScheduler("OneCycleLR", optimizer, divided(per_group(max_lrs, optimizer), options.div_factor)),
      max_lrs_(per_group(std::move(max_lrs), optimizer)),
      total_steps_(total_steps),
      options_(options) {
  if (total_steps < 1) throw Error(name(), concat("total_steps must be >= 1, got ", total_steps));
  if (!(options.pct_start >= 0 && options.pct_start <= 1))
    throw Error(name(), concat("pct_start must be in [0, 1], got ", options.pct_start));
  if (!(options.div_factor > 0) || !(options.final_div_factor > 0))
    throw Error(name(), concat("div_factor and final_div_factor must be > 0, got ", options.div_factor, " and ",
                               options.final_div_factor));
  initial_step();
}

double OneCycleLR::lr_at(std::size_t group, std::int64_t step) const {
  if (step > total_steps_)
    throw Error(name(), concat("tried to step ", step, " times; total_steps is ", total_steps_));
  const double max_lr = max_lrs_[group], initial = max_lr / options_.div_factor;
  const double min_lr = initial / options_.final_div_factor;
  const double total = static_cast<double>(total_steps_), up_end = options_.pct_start * total - 1;
  struct Phase {
    double end_step, start_lr, end_lr;
  };
  std::vector<Phase> phases;
  if (options_.three_phase)
    phases = {{up_end, initial, max_lr}, {2 * options_.pct_start * total - 2, max_lr, initial}, {total - 1, initial, min_lr}};
  else
    phases = {{up_end, initial, max_lr}, {total - 1, max_lr, min_lr}};
  // PyTorch's phase walk: the first phase whose end is not before `step` (else the last).
  const auto s = static_cast<double>(step);
  double start_step = 0;
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const Phase& phase = phases[i];
    if (s <= phase.end_step || i + 1 == phases.size()) {
      // Step total_steps (the last step() call) stays at the end lr: PyTorch extrapolates
      // one step further, which the linear anneal takes below zero.
      const double pct = std::min(1.0, (s - start_step) / (phase.end_step - start_step));
      if (options_.anneal_strategy == AnnealStrategy::Linear) return (phase.end_lr - phase.start_lr) * pct + phase.start_lr;
      return phase.end_lr + (phase.start_lr - phase.end_lr) / 2 * (std::cos(std::numbers::pi * pct) + 1);
    }
    start_step = phase.end_step;
  }
  return min_lr;  // not reached: the last phase always answers
}

void OneCycleLR::write_hyperparameters(StateDict& out, const std::string& prefix) const {
  StateWriter w(out, prefix);
  w.reals("max_lrs", max_lrs_);
  w.integer("total_steps", total_steps_);
  w.real("pct_start", options_.pct_start);
  w.integer("anneal_strategy", options_.anneal_strategy == AnnealStrategy::Cos ? 0 : 1);
  w.real("div_factor", options_.div_factor);
  w.real("final_div_factor", options_.final_div_factor);
  w.flag("three_phase", options_.three_phase);
}

// ---- LambdaLR ----

LambdaLR::LambdaLR(Optimizer& optimizer, Lambda lr_lambda)
    : LambdaLR(optimizer, std::vector<Lambda>(optimizer.num_param_groups(), std::move(lr_lambda))) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas)
    : LRScheduler("LambdaLR", optimizer), lr_lambdas_(std::move(lr_lambdas)) {
  if (lr_lambdas_.size() != optimizer.num_param_groups())
    throw Error(name(), concat("got ", lr_lambdas_.size(), " lr_lambdas for ", optimizer.num_param_groups(),
                               " param groups"));
  for (std::size_t g = 0; g < lr_lambdas_.size(); ++g)
    if (!lr_lambdas_[g]) throw Error(name(), concat("lr_lambda ", g, " is empty"));
  initial_step();
}

double LambdaLR::lr_at(std::size_t group, std::int64_t step) const { return base_lrs()[group] * lr_lambdas_[group](step); }

// ---- SequentialLR ----

namespace {

// The first scheduler's base lrs, after checking the list.
std::vector<double> first_base_lrs(const std::vector<std::shared_ptr<LRScheduler>>& schedulers,
                                   const std::vector<std::int64_t>& milestones, const Optimizer& optimizer) {
  if (schedulers.empty()) throw Error("SequentialLR", "needs at least one scheduler");
  for (std::size_t i = 0; i < schedulers.size(); ++i) {
    if (!schedulers[i]) throw Error("SequentialLR", concat("scheduler ", i, " is null"));
    if (&schedulers[i]->optimizer() != &optimizer)
      throw Error("SequentialLR", concat("scheduler ", i, " (", schedulers[i]->name(), ") acts on another optimizer"));
  }
  if (milestones.size() + 1 != schedulers.size())
    throw Error("SequentialLR", concat("expected ", schedulers.size() - 1, " milestones for ", schedulers.size(),
                                       " schedulers, got ", milestones.size()));
  for (std::size_t i = 0; i < milestones.size(); ++i)
    if (milestones[i] < 0 || (i > 0 && milestones[i] < milestones[i - 1]))
      throw Error("SequentialLR", concat("milestones must be >= 0 and non-decreasing, got ", milestones));
  return schedulers[0]->base_lrs();
}

}  // namespace

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<std::int64_t> milestones)
    : LRScheduler("SequentialLR", optimizer, first_base_lrs(schedulers, milestones, optimizer)),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  for (const auto& scheduler : schedulers_) scheduler->base_lrs_ = base_lrs();
  initial_step();
}

double SequentialLR::lr_at(std::size_t group, std::int64_t step) const {
  const auto i = static_cast<std::size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), step) - milestones_.begin());
  return schedulers_[i]->lr_at(group, i == 0 ? step : step - milestones_[i - 1]);
}

void SequentialLR::write_hyperparameters(StateDict& out, const std::string& prefix) const {
  StateWriter(out, prefix).integers("milestones", milestones_);
  for (std::size_t i = 0; i < schedulers_.size(); ++i)
    schedulers_[i]->write_hyperparameters(out, concat(prefix, "schedulers.", i, "."));
}

}  // namespace infini::optim
