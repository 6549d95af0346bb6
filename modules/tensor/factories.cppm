// Factories: new tensors from sizes, values, ranges, random numbers or existing memory.
// Unless a factory says otherwise an unset dtype means float32.
export module infini.tensor:factories;
import infini.std;
import :error;
import :dtype;
import :device;
import :generator;
import :scalar;
import :shape;
import :storage;
import :tensor;

export namespace infini {

Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
// Unset dtype: the value's kind (bool, int64 or float32), like torch.full.
Tensor full(const Shape& shape, const Scalar& value, TensorOptions options = {});
// A 0-d tensor holding `value` (unset dtype: the value's kind).
Tensor scalar_tensor(const Scalar& value, TensorOptions options = {});

// Same shape (and, unless given, dtype and device) as `like`.
Tensor empty_like(const Tensor& like, std::optional<TensorOptions> options = {});
Tensor zeros_like(const Tensor& like, std::optional<TensorOptions> options = {});
Tensor ones_like(const Tensor& like, std::optional<TensorOptions> options = {});
Tensor full_like(const Tensor& like, const Scalar& value, std::optional<TensorOptions> options = {});

// Values start, start + step, ... below end (above it for a negative step). Unset dtype:
// int64 when every argument is an integer, float32 otherwise.
Tensor arange(const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, TensorOptions options = {});
// `steps` evenly spaced values from start to end inclusive.
Tensor linspace(double start, double end, std::int64_t steps, TensorOptions options = {});
// n x m matrix with ones on the diagonal (m = n when not given).
Tensor eye(std::int64_t n, TensorOptions options = {});
Tensor eye(std::int64_t n, std::int64_t m, TensorOptions options = {});

// Random tensors. Element i depends only on the generator's seed and counter (see
// :generator), so the values do not depend on the thread count, and a tensor made for
// a CUDA device holds the same values as one made on the CPU.
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);   // U[0, 1)
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);  // N(0, 1)
// Integers uniformly in [low, high); unset dtype: int64.
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, TensorOptions options = {},
               Generator* generator = nullptr);

// A CPU tensor holding a copy of `values`, viewed as `shape` (1-d when empty), then moved
// to options.device; an unset dtype means T's own.
template <class T>
Tensor from_vector(const std::vector<T>& values, Shape shape = {}, TensorOptions options = {}) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(values.size())};
  const std::int64_t numel = checked_numel("from_vector", shape);
  if (numel != static_cast<std::int64_t>(values.size()))
    throw ShapeError("from_vector", concat(values.size(), " values do not fill shape ", shape, " (", numel,
                                           " elements)"));
  Tensor host = empty(shape, {.dtype = data_type_of<T>()});
  T* out = host.template data_ptr<T>();
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return host.to(options.device, options.dtype.value_or(data_type_of<T>()));
}

// A tensor over memory the caller owns (no copy). `deleter`, if given, runs when the last
// tensor using the memory dies. Without strides the memory is contiguous. The caller
// promises that every element the shape and strides reach is valid memory.
Tensor from_blob(void* data, const Shape& shape, DataType dtype, Device device = Device::cpu(),
                 std::function<void(void*)> deleter = {});
Tensor from_blob(void* data, const Shape& shape, const Strides& strides, DataType dtype,
                 Device device = Device::cpu(), std::function<void(void*)> deleter = {});

}  // namespace infini
