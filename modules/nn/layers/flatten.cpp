// Flatten (see flatten.cppm).
module infini.nn;
import infini.std;

namespace infini::nn {

Tensor FlattenImpl::forward(const Tensor& x) {
  return with_layer_name(type_name(), [&] { return x.flatten(start_dim, end_dim); });
}

std::string FlattenImpl::extra_repr() const { return concat("start_dim=", start_dim, ", end_dim=", end_dim); }

}  // namespace infini::nn
