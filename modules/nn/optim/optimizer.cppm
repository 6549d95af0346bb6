// Optimizer: the base of SGD, Adam, AdamW. An optimizer holds parameter groups (each a list
// of leaf tensors with its own options, e.g. no weight decay for biases) and per-parameter
// state (momentum buffers, moment estimates); step() updates every parameter that has a
// grad. Parameters are numbered across groups in order (group 0's first is 0), as in
// PyTorch; state_dict() uses those numbers:
//   param_groups.<g>.params   1-d int64, the numbers of group g's parameters
//   param_groups.<g>.lr       0-d float64, and the optimizer's other options (see each one)
//   state.<i>.<name>          parameter i's state tensors and step counts
// TypedOptimizer<Options, State> implements the bookkeeping for one options type.
export module infini.nn:optimizer;
import infini.std;
import :state_dict;
import :state_entries;

export namespace infini::optim {

// Parameters updated with their own options; unset options mean the optimizer's defaults.
template <class Options>
struct ParamGroup {
  std::vector<Tensor> params = {};
  std::optional<Options> options = std::nullopt;
};

class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a grad (parameters without one are skipped).
  virtual void step() = 0;
  // The update step() would make after mul_(grad, grad_scale) on every grad (each product
  // rounded to the grad's dtype): clip_grad_norm_'s coefficient (clip_coefficient) applied
  // without its own pass over the grads. Adam and AdamW fold the scale into their update and
  // leave the grads as they are; other optimizers scale the grads in place, then step().
  virtual void scaled_step(double grad_scale);
  // scaled_step with the scale in a one-element float64 tensor on the parameters' device. A
  // capturable Adam or AdamW (set_capturable) reads it when its update runs, so a CUDA graph
  // can capture the step (with clip_coefficient of total_grad_norm_tensor, nothing is read
  // back); other optimizers read its value back: scaled_step(value).
  virtual void scaled_step(const Tensor& grad_scale);
  // Drops every parameter's grad (set_to_none) or fills it with zeros.
  void zero_grad(bool set_to_none = true);

  std::size_t num_param_groups() const noexcept { return groups_.size(); }
  // Learning rate of param group `group` (IndexError when out of range).
  double lr(std::size_t group) const;
  // Error unless lr is finite and >= 0.
  void set_lr(std::size_t group, double lr);
  const std::vector<Tensor>& params(std::size_t group) const;
  // Every group's parameters, in the numbering of the state dict.
  std::vector<Tensor> all_params() const;
  std::size_t num_params() const noexcept;

  // A snapshot (copies) of the options and state; see the file comment for the keys.
  virtual StateDict state_dict() const;
  // Checks the group count, the parameter count of each group, every key (unknown and
  // missing keys are Errors), the shapes of state tensors (ShapeError) and their dtypes
  // (floating point: converted to the parameter's dtype, like PyTorch), then replaces the
  // options and state all at once, so training continues exactly where it was saved.
  virtual void load_state_dict(const StateDict& state);

  // "SGD", "Adam", "AdamW": the op name of this optimizer's errors.
  const std::string& name() const noexcept { return name_; }

 protected:
  explicit Optimizer(std::string name) : name_(std::move(name)) {}

  // Appends a group after checking its parameters: defined, floating point, leaves, on the
  // CPU, no two elements at one address, and in no group yet (Error naming the optimizer).
  void add_group_params(std::vector<Tensor> params);
  // IndexError from "<name>.<method>" unless group < num_param_groups().
  void check_group(std::string_view method, std::size_t group) const;
  // Error from "<name>.scaled_step" unless grad_scale is one float64 element on `device`.
  void check_grad_scale(const Tensor& grad_scale, Device device) const;
  // Error from "<name>.<method>" inside a CUDA graph capture: the graph would replay the update
  // with this step's host values (learning rate, step counts). `hint` ends the message.
  void refuse_capture(std::string_view method, std::string_view hint) const;

  // fn(group, index, param, grad) for every parameter with a grad, in the state-dict
  // numbering, after checking all grads against their parameters (shape, dtype, device).
  template <class Fn>
  void for_each_grad(Fn&& fn) const {
    for (int pass = 0; pass < 2; ++pass) {
      std::size_t index = 0;
      for (std::size_t g = 0; g < groups_.size(); ++g)
        for (const Tensor& param : groups_[g]) {
          const Tensor& grad = param.grad();
          if (grad.defined()) {
            if (pass == 0) check_grad(index, param, grad);
            else fn(g, index, param, grad);
          }
          ++index;
        }
    }
  }

  // What TypedOptimizer implements for one options type.
  virtual double group_lr(std::size_t group) const = 0;
  virtual void set_group_lr(std::size_t group, double lr) = 0;
  // Group options (everything but "params") and the state of parameter `index` (nothing
  // when it has none).
  virtual void write_group(std::size_t group, StateWriter& out) const = 0;
  virtual void write_param_state(std::size_t index, StateWriter& out) const = 0;
  // Reads every group's options and every parameter's state (states[i] empty: none saved),
  // checks them all, then replaces the current ones.
  virtual void read_all(std::vector<StateReader>& groups, std::vector<std::optional<StateReader>>& states) = 0;

 private:
  void check_grad(std::size_t index, const Tensor& param, const Tensor& grad) const;

  std::string name_;
  std::vector<std::vector<Tensor>> groups_;
};

// An optimizer whose groups have options of type Options (an aggregate with a `lr` field)
// and whose parameters carry State once they have been updated. Derived classes check,
// write and read both, and call init() from their constructors.
template <class Options, class State>
class TypedOptimizer : public Optimizer {
 public:
  const Options& defaults() const noexcept { return defaults_; }
  const Options& options(std::size_t group) const {
    check_group("options", group);
    return options_[group];
  }
  void set_options(std::size_t group, const Options& options) {
    check_group("set_options", group);
    check_options(options, name() + ".set_options");
    options_[group] = options;
  }
  // Adds parameters updated with group.options (or the defaults).
  void add_param_group(ParamGroup<Options> group) {
    const Options options = group.options.value_or(defaults_);
    check_options(options, name());
    add_group_params(std::move(group.params));
    options_.push_back(options);
    state_.resize(num_params());
  }

 protected:
  TypedOptimizer(std::string name, Options defaults) : Optimizer(std::move(name)), defaults_(std::move(defaults)) {}

  // Checks the defaults and adds the groups (at least one parameter in all).
  void init(std::vector<ParamGroup<Options>> groups) {
    check_options(defaults_, name());
    for (ParamGroup<Options>& group : groups) add_param_group(std::move(group));
    if (num_params() == 0) throw Error(name(), "got an empty parameter list");
  }

  // Error from `op` naming the offending value.
  virtual void check_options(const Options& options, const std::string& op) const = 0;
  virtual void write_options(const Options& options, StateWriter& out) const = 0;
  virtual Options read_options(StateReader& in) const = 0;
  virtual void write_state(const State& state, StateWriter& out) const = 0;
  virtual State read_state(StateReader& in, const Tensor& param, const Options& options) const = 0;

  Options defaults_;
  std::vector<Options> options_;             // per group
  std::vector<std::optional<State>> state_;  // per parameter, in the state-dict numbering

 protected:
  double group_lr(std::size_t group) const override { return options_[group].lr; }
  void set_group_lr(std::size_t group, double lr) override {
    Options options = options_[group];
    options.lr = lr;
    check_options(options, name() + ".set_lr");
    options_[group] = options;
  }
 private:
  void write_group(std::size_t group, StateWriter& out) const override { write_options(options_[group], out); }
  void write_param_state(std::size_t index, StateWriter& out) const override {
    if (state_[index]) write_state(*state_[index], out);
  }
  void read_all(std::vector<StateReader>& groups, std::vector<std::optional<StateReader>>& states) override {
    const std::string op = name() + ".load_state_dict";
    std::vector<Options> options;
    for (StateReader& in : groups) {
      options.push_back(read_options(in));
      in.finish();
      check_options(options.back(), op);
    }
    std::vector<std::optional<State>> state(num_params());
    std::size_t index = 0;
    for (std::size_t g = 0; g < num_param_groups(); ++g)
      for (const Tensor& param : params(g)) {
        if (states[index]) {
          state[index] = read_state(*states[index], param, options[g]);
          states[index]->finish();
        }
        ++index;
      }
    options_ = std::move(options);
    state_ = std::move(state);
  }
};

}  // namespace infini::optim
