// Scalar math shared by the CPU elementwise kernels: the compute type of each storage
// type (float for f16/bf16) and NaN tests that also accept integers.
export module infini.kernels:elementwise_math;
import infini.std;
import infini.tensor;

export namespace infini::kernels {

template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <class T>
constexpr bool is_float_compute = std::is_floating_point_v<compute_t<T>>;

template <class C>
bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(x);
  else return false;
}

}  // namespace infini::kernels
