// Learning-rate schedulers (torch.optim.lr_scheduler). Call step() once per optimizer step;
// the constructor already sets the lrs of step 0, as in PyTorch. Each scheduler is a closed
// form lr_at(group, step) of its base lrs (the groups' lrs when it was built), so a
// scheduler resumed from its state dict continues with exactly the same lrs. Two
// schedulers on one optimizer do not multiply as PyTorch's chainable forms do: combine
// them with SequentialLR, or write the product in a LambdaLR.
//
// State dict: "last_epoch" (0-d int64, the steps taken), "base_lrs" and "last_lr" (1-d
// float64, one per group), and each hyperparameter under its PyTorch name ("gamma",
// "step_size", "milestones", ...). Loading checks that the hyperparameters match the
// scheduler's own (it must be built with the same arguments; a LambdaLR's function cannot
// be saved) and leaves the optimizer's lrs alone: its own state dict holds them.
export module infini.nn:lr_scheduler;
import infini.std;
import :state_dict;
import :state_entries;
import :optimizer;

export namespace infini::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // One step: last_epoch() + 1, and every group's lr set to lr_at(group, last_epoch()).
  void step();
  // The lrs the last step (or the constructor) set, one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  // Steps taken since construction (PyTorch's last_epoch).
  std::int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // The lr of param group `group` at step `step` (>= 0).
  virtual double lr_at(std::size_t group, std::int64_t step) const = 0;

  Optimizer& optimizer() const { return optimizer_; }
  // "StepLR", ...: the op name of this scheduler's errors.
  const std::string& name() const { return name_; }

  StateDict state_dict() const;
  // Error when a key is missing or unknown, the group count differs from the optimizer's
  // or a hyperparameter differs from this scheduler's; IndexError for a negative last_epoch.
  void load_state_dict(const StateDict& state);

 protected:
  // Base lrs: the optimizer's current lrs, or `base_lrs` (one per group) when given.
  LRScheduler(std::string name, Optimizer& optimizer, std::vector<double> base_lrs = {});
  // Sets the lrs of step 0; derived constructors call it once lr_at can run.
  void initial_step();
  // Writes the hyperparameters as "<prefix><name>" entries.
  virtual void write_hyperparameters(StateDict& out, const std::string& prefix) const = 0;

 private:
  friend class SequentialLR;  // gives its schedulers its base lrs
  void set_lrs(std::int64_t step);

  std::string name_;
  Optimizer& optimizer_;
  std::vector<double> base_lrs_, last_lr_;
  std::int64_t last_epoch_ = 0;
};

// base * factor for the first total_iters steps, then base.
class ConstantLR : public LRScheduler {
 public:
  // Error unless 0 <= factor <= 1 and total_iters >= 0.
  ConstantLR(Optimizer& optimizer, double factor = 1.0 / 3, std::int64_t total_iters = 5);
  double lr_at(std::size_t group, std::int64_t step) const override;

 private:
  void write_hyperparameters(StateDict& out, const std::string& prefix) const override;
  double factor_;
  std::int64_t total_iters_;
};

// base * gamma^floor(step / step_size).
class StepLR : public LRScheduler {
 public:
  // Error unless step_size >= 1 and gamma >= 0.
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);
  double lr_at(std::size_t group, std::int64_t step) const override;

 private:
  void write_hyperparameters(StateDict& out, const std::string& prefix) const override;
  std::int64_t step_size_;
  double gamma_;
};

// base * gamma^(number of milestones <= step); a repeated milestone counts each time.
class MultiStepLR : public LRScheduler {
 public:
  // Error unless gamma >= 0.
  MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma = 0.1);
  double lr_at(std::size_t group, std::int64_t step) const override;

 private:
  void write_hyperparameters(StateDict& out, const std::string& prefix) const override;
  std::vector<std::int64_t> milestones_;  // sorted
  double gamma_;
};

// base * gamma^step.
class ExponentialLR : public LRScheduler {
 public:
  // Error unless gamma >= 0.
  ExponentialLR(Optimizer& optimizer, double gamma);
  double lr_at(std::size_t group, std::int64_t step) const override;

 private:
  void write_hyperparameters(StateDict& out, const std::string& prefix) const override;
  double gamma_;
};

// Linear warmup (or decay) of the factor: base * (start + (end - start) * min(step, total_iters) / total_iters).
class LinearLR : public LRScheduler {
 public:
  // Error unless 0 < start_factor <= 1, 0 <= end_factor <= 1 and total_iters >= 1.
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, std::int64_t total_iters = 5);
  double lr_at(std::size_t group, std::int64_t step) const override;

 private:
  void write_hyperparameters(StateDict& out, const std::string& prefix) const override;
  double start_factor_, end_factor_;
  std::int64_t total_iters_;
};

// eta_min + (base - eta_min) (1 + cos(pi step / T_max)) / 2 (PyTorch's closed form; past
// T_max the cosine goes up again).
class CosineAnnealingLR : public LRScheduler {
 public:
  // Error unless T_max >= 1 and eta_min >= 0.
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min = 0);
  double lr_at(std::size_t group, std::int64_t step) const override;

 private:
  void write_hyperparameters(StateDict& out, const std::string& prefix) const override;
  std::int64_t T_max_;
  double eta_min_;
};

// llm.c's schedule (train_gpt2's get_learning_rate_cosine): base (step + 1) / warmup_steps
// while step < warmup_steps, then min_lr + (base - min_lr) (1 + cos(pi r)) / 2 with
// r = (step - warmup_steps) / (total_steps - warmup_steps), held at min_lr after
// total_steps. (llm.c's final_learning_rate_frac f is min_lr = f * base.)
double cosine_with_warmup(double base_lr, std::int64_t step, std::int64_t warmup_steps, std::int64_t total_steps,
                          double min_lr);

// cosine_with_warmup for every group.
class CosineWithWarmupLR : public LRScheduler {
 public:
  // Error unless 0 <= warmup_steps < total_steps and min_lr >= 0.
  CosineWithWarmupLR(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t total_steps, double min_lr = 0);
  double lr_at(std::size_t group, std::int64_t step) const override;

 private:
  void write_hyperparameters(StateDict& out, const std::string& prefix) const override;
  std::int64_t warmup_steps_, total_steps_;
  double min_lr_;
};

enum class AnnealStrategy { Cos, Linear };

struct OneCycleLROptions {
  double pct_start = 0.3;  // fraction of the steps spent going up
  AnnealStrategy anneal_strategy = AnnealStrategy::Cos;
  double div_factor = 25;        // initial lr = max_lr / div_factor
  double final_div_factor = 1e4;  // min lr = initial lr / final_div_factor
  bool three_phase = false;       // up, back down to the initial lr, then to the min lr
};

// The 1cycle policy (Smith & Topor): from max_lr / div_factor up to max_lr over the first
// pct_start of total_steps, then down to the min lr at step total_steps - 1, annealing by
// cosine or linearly (PyTorch's phases), and stays there at step total_steps (PyTorch
// extrapolates that one step, below zero with linear annealing). The base lrs are the
// initial lrs. Momentum is not cycled (the Optimizer interface has lrs only).
class OneCycleLR : public LRScheduler {
 public:
  // max_lrs: one per group, or one for all. Error unless total_steps >= 1, every max lr
  // > 0, 0 <= pct_start <= 1 and both div factors > 0. Stepping past total_steps is an Error.
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, std::int64_t total_steps, OneCycleLROptions options = {});
  OneCycleLR(Optimizer& optimizer, double max_lr, std::int64_t total_steps, OneCycleLROptions options = {})
      : OneCycleLR(optimizer, std::vector<double>{max_lr}, total_steps, options) {}
  double lr_at(std::size_t group, std::int64_t step) const override;

 private:
  void write_hyperparameters(StateDict& out, const std::string& prefix) const override;
  std::vector<double> max_lrs_;
  std::int64_t total_steps_;
  OneCycleLROptions options_;
};

// base * lr_lambda(step); one function for all groups or one per group.
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(std::int64_t step)>;
  // Error unless every function is set (and, for a list, there is one per group).
  LambdaLR(Optimizer& optimizer, Lambda lr_lambda);
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas);
  double lr_at(std::size_t group, std::int64_t step) const override;

 private:
  void write_hyperparameters(StateDict&, const std::string&) const override {}
  std::vector<Lambda> lr_lambdas_;
};

// schedulers[0] until milestones[0], then schedulers[1] from its step 0, ...: at step s
// the scheduler i with milestones[i-1] <= s < milestones[i] gives lr_at(s - milestones[i-1]).
// All use the first scheduler's base lrs (the lrs before any of them was built, like
// PyTorch's initial_lr); they are driven by this scheduler and must not be stepped.
class SequentialLR : public LRScheduler {
 public:
  // Error unless there is at least one scheduler, all on `optimizer`, milestones has one
  // entry fewer than schedulers, and milestones are >= 0 and non-decreasing.
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<std::int64_t> milestones);
  double lr_at(std::size_t group, std::int64_t step) const override;

 private:
  void write_hyperparameters(StateDict& out, const std::string& prefix) const override;
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<std::int64_t> milestones_;
};

}  // namespace infini::optim
