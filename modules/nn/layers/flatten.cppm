// Identity and Flatten: layers that only pass or reshape their input (torch.nn.Identity,
// torch.nn.Flatten).
export module infini.nn:flatten;
import infini.std;
import infini.autograd;
import :module_base;

export namespace infini::nn {

// y = x (the same tensor).
class IdentityImpl : public Cloneable<IdentityImpl> {
 public:
  IdentityImpl() : Cloneable("Identity") {}
  void reset() override {}
  Tensor forward(const Tensor& x) override { return x; }
};
using Identity = ModuleHolder<IdentityImpl>;

// Merges dims start_dim..end_dim (negative: from the end) into one: (N, C, H, W) -> (N, C*H*W)
// with the defaults. A view when the strides allow.
class FlattenImpl : public Cloneable<FlattenImpl> {
 public:
  explicit FlattenImpl(std::int64_t start_dim = 1, std::int64_t end_dim = -1)
      : Cloneable("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override;

  std::int64_t start_dim, end_dim;

 protected:
  std::string extra_repr() const override;
};
using Flatten = ModuleHolder<FlattenImpl>;

}  // namespace infini::nn
