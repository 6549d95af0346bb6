// SGD: stochastic gradient descent with optional momentum, dampening, Nesterov momentum and
// L2 weight decay (torch.optim.SGD's algorithm and defaults). State dict entries:
//   param_groups.<g>.{lr, momentum, dampening, weight_decay}  0-d float64
//   param_groups.<g>.nesterov                                 0-d int64 flag
//   state.<i>.momentum_buffer                                 the parameter's shape and dtype,
//                                                             once momentum has been used
export module infini.nn:sgd;
import infini.std;
import :state_dict;
import :state_entries;
import :optimizer;

export namespace infini::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0
};

struct SGDState {
  Tensor momentum_buffer;
};

class SGD : public TypedOptimizer<SGDOptions, SGDState> {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  explicit SGD(std::vector<ParamGroup<SGDOptions>> groups, SGDOptions defaults = {});

  void step() override;

 private:
  void check_options(const SGDOptions& options, const std::string& op) const override;
  void write_options(const SGDOptions& options, StateWriter& out) const override;
  SGDOptions read_options(StateReader& in) const override;
  void write_state(const SGDState& state, StateWriter& out) const override;
  SGDState read_state(StateReader& in, const Tensor& param, const SGDOptions& options) const override;
};

}  // namespace infini::optim
