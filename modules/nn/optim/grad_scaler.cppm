// GradScaler: dynamic loss scaling for reduced-precision training (torch.amp.GradScaler).
//   Tensor loss = ...;
//   scaler.scale(loss).backward();   // grads are `scale` times too large
//   scaler.unscale_(opt);            // optional: divide them back, e.g. before clip_grad_norm_
//   scaler.step(opt);                // unscales if needed; skips opt.step() on Inf/NaN grads
//   scaler.update();                 // backoff after a skipped step, growth after
//                                    // growth_interval clean ones
// State dict (empty when disabled): scale, growth_factor, backoff_factor (0-d float64),
// growth_interval, _growth_tracker (0-d int64), PyTorch's names.
export module infini.nn:grad_scaler;
import infini.std;
import :state_dict;
import :optimizer;

export namespace infini::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // in (0, 1)
  std::int64_t growth_interval = 2000;
  bool enabled = true;  // disabled: scale() returns the loss, step() just steps
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale (differentiable), or loss itself when disabled.
  Tensor scale(const Tensor& loss) const;
  // Multiplies the grads of optimizer's parameters by 1 / scale (rounded to float32, like
  // PyTorch) and records whether any holds Inf or NaN. Once per optimizer between update()s;
  // an Error when called twice or after step(). float16 grads are a DTypeError, as in
  // PyTorch (keep float32 master parameters).
  void unscale_(Optimizer& optimizer);
  // Unscales if unscale_ was not called, then runs optimizer.step() unless a grad held
  // Inf/NaN. Returns whether the step ran. Once per optimizer between update()s.
  bool step(Optimizer& optimizer);
  // Next scale: scale * backoff_factor if any optimizer saw Inf/NaN since the last update,
  // scale * growth_factor after growth_interval clean updates in a row (only while the
  // result is finite), else unchanged. An Error when no optimizer was unscaled.
  void update();
  // Sets the scale directly (finite, > 0) and starts a new iteration.
  void update(double new_scale);

  double get_scale() const noexcept { return enabled_ ? scale_ : 1.0; }
  double get_growth_factor() const noexcept { return growth_factor_; }
  double get_backoff_factor() const noexcept { return backoff_factor_; }
  std::int64_t get_growth_interval() const noexcept { return growth_interval_; }
  // Clean updates in a row since the last growth or backoff.
  std::int64_t get_growth_tracker() const noexcept { return growth_tracker_; }
  bool is_enabled() const noexcept { return enabled_; }

  StateDict state_dict() const;
  // Does nothing when disabled; an Error for an empty state (saved by a disabled scaler),
  // missing or unknown keys and out-of-range values.
  void load_state_dict(const StateDict& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptimizerState {
    Stage stage = Stage::Ready;
    bool found_inf = false;
  };

  double scale_;
  double growth_factor_;
  double backoff_factor_;
  std::int64_t growth_interval_;
  std::int64_t growth_tracker_ = 0;
  bool enabled_;
  std::map<const Optimizer*, OptimizerState> per_optimizer_;  // since the last update()
};

}  // namespace infini::optim
