// Dropout (see dropout.cppm).
module infini.nn;
import infini.std;

namespace infini::nn {

DropoutImpl::DropoutImpl(double p) : Cloneable("Dropout"), p(p) { reset(); }

void DropoutImpl::reset() {
  if (!(p >= 0 && p <= 1)) throw Error(type_name(), concat("probability p must be in [0, 1], got ", p));
}

Tensor DropoutImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return dropout(x, p, is_training()); });
}

std::string DropoutImpl::extra_repr() const { return concat("p=", p); }

}  // namespace infini::nn
