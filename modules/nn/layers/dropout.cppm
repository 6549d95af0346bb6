// Dropout (torch.nn.Dropout): in training, zeroes each element with probability p and
// scales the others by 1 / (1 - p), drawing from the default generator (manual_seed makes
// it reproducible); in evaluation, the identity.
export module infini.nn:dropout;
import infini.std;
import infini.autograd;
import :module_base;

export namespace infini::nn {

class DropoutImpl : public Cloneable<DropoutImpl> {
 public:
  explicit DropoutImpl(double p = 0.5);
  void reset() override;  // checks p: there is nothing to build
  Tensor forward(const Tensor& x) override;

  double p;

 protected:
  std::string extra_repr() const override;
};
using Dropout = ModuleHolder<DropoutImpl>;

}  // namespace infini::nn
