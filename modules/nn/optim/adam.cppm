// Adam and AdamW (torch.optim.Adam / torch.optim.AdamW: algorithms, bias correction and
// defaults). Adam's weight_decay is L2 (added to the grad); AdamW's is decoupled
// (param *= 1 - lr * weight_decay before the update) and defaults to 1e-2. State dict entries:
//   param_groups.<g>.{lr, eps, weight_decay}  0-d float64
//   param_groups.<g>.betas                    1-d float64 [beta1, beta2]
//   param_groups.<g>.amsgrad                  0-d int64 flag
//   state.<i>.step                            0-d int64: updates of parameter i so far (PyTorch
//                                             keeps a float32 tensor; a float one with an
//                                             integral value also loads)
//   state.<i>.{exp_avg, exp_avg_sq}           the parameter's shape and dtype
//   state.<i>.max_exp_avg_sq                  the same, with amsgrad
// Capturable mode (set_capturable, torch.optim.Adam(capturable=True)): the learning rates and
// step counts also live in tensors on the parameters' device, which the update kernels read
// when they run, so a step can be captured in a CUDA graph and replayed (see set_capturable).
export module infini.nn:adam;
import infini.std;
import :state_dict;
import :state_entries;
import :optimizer;

export namespace infini::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};  // each in [0, 1)
  double eps = 1e-8;
  double weight_decay = 0;  // L2 penalty, added to the grad
  bool amsgrad = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: param *= 1 - lr * weight_decay
  bool amsgrad = false;
};

struct AdamState {
  std::int64_t step = 0;  // updates so far; in capturable mode device_step holds the count
  Tensor device_step;     // capturable mode: 0-d int64 on the parameter's device
  Tensor exp_avg;         // first moment estimate
  Tensor exp_avg_sq;      // second moment estimate
  Tensor max_exp_avg_sq;  // amsgrad: running maximum of exp_avg_sq
};

// What Adam and AdamW share; kDecoupled selects the weight decay.
template <class Options, bool kDecoupled>
class AdamBase : public TypedOptimizer<Options, AdamState> {
 public:
  void step() override;
  void scaled_step(double grad_scale) override;
  void scaled_step(const Tensor& grad_scale) override;

  // Capturable mode: every update reads its learning rate, step count and grad scale from
  // tensors on the parameters' device (all parameters on one device) when it runs, so the
  // step can be captured in a CUDA graph whose replays use their current values:
  //   optimizer.set_capturable(true);
  //   ... one step outside the capture (it creates the moment estimates) ...
  //   graph.capture_begin(gpu); loss.backward(); optimizer.scaled_step(coefficient); graph.capture_end();
  //   each step: scheduler.step() (set_lr writes the device copy); graph.replay();
  // Options other than the learning rate are fixed in a captured graph. Off again, the step
  // counts return to the host. Not inside a capture (Error).
  void set_capturable(bool capturable);
  bool capturable() const noexcept { return capturable_; }
  void load_state_dict(const StateDict& state) override;

 protected:
  AdamBase(std::string name, Options defaults) : TypedOptimizer<Options, AdamState>(std::move(name), defaults) {}

 private:
  void set_group_lr(std::size_t group, double lr) override;
  // Capturable mode: creates lrs_ and steps_ from the host options and states, and moves
  // the step counts back to the host states.
  void push_scalars();
  void pull_steps();
  void capturable_step(const Tensor& grad_scale);
  void check_options(const Options& options, const std::string& op) const override;
  void write_options(const Options& options, StateWriter& out) const override;
  Options read_options(StateReader& in) const override;
  void write_state(const AdamState& state, StateWriter& out) const override;
  AdamState read_state(StateReader& in, const Tensor& param, const Options& options) const override;

  bool capturable_ = false;
  Tensor lrs_;    // capturable: float64 [groups], the learning rates on the parameters' device
  Tensor steps_;  // capturable: int64 [params], the step counts there (0: no state yet)
};

class Adam final : public AdamBase<AdamOptions, false> {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  explicit Adam(std::vector<ParamGroup<AdamOptions>> groups, AdamOptions defaults = {});
};

class AdamW final : public AdamBase<AdamWOptions, true> {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  explicit AdamW(std::vector<ParamGroup<AdamWOptions>> groups, AdamWOptions defaults = {});
};

}  // namespace infini::optim

namespace infini::optim {
// Defined in adam.cpp.
extern template class AdamBase<AdamOptions, false>;
extern template class AdamBase<AdamWOptions, true>;
}  // namespace infini::optim
