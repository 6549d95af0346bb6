// Factories. Values that do not come from a kernel (ranges, eye) are written on the
// host in float64 or int64 and converted by the copy kernel to the dtype and device asked for.
module;
#include <cmath>
#include <cstdint>
module infini.tensor;
import infini.std;

namespace infini {
namespace {

Tensor from_host_values(const std::vector<double>& values, const Shape& shape, TensorOptions options) {
  return from_vector(values, shape, {.dtype = options.dtype.value_or(kFloat32), .device = options.device});
}

void check_floating(std::string_view op, DataType dtype) {
  if (!is_floating_point(dtype))
    throw DTypeError(op, concat("expected a floating-point dtype, got ", dtype));
}

// Random values made on `device` by Op's kernel from a fresh range of the generator's
// counters (element i uses counter offset + i on every device).
template <class Op, class... Params>
Tensor random_tensor(const Shape& shape, DataType dtype, Device device, Generator* generator, Params... params) {
  Tensor out = empty(shape, {.dtype = dtype, .device = device});
  const PhiloxState state = (generator ? *generator : default_generator()).reserve(out.numel());
  KernelTable<Op>::call(device, out, params..., state);
  return out;
}

}  // namespace

Tensor empty(const Shape& shape, TensorOptions options) {
  const DataType dtype = options.dtype.value_or(kFloat32);
  const std::int64_t nbytes = checked_nbytes("empty", shape, itemsize(dtype));
  return Tensor(Storage::allocate(nbytes, options.device), shape, contiguous_strides(shape), 0, dtype);
}

Tensor full(const Shape& shape, const Scalar& value, TensorOptions options) {
  Tensor result = empty(shape, {.dtype = options.dtype.value_or(value.default_dtype()), .device = options.device});
  result.fill_(value);
  return result;
}

Tensor zeros(const Shape& shape, TensorOptions options) {
  return full(shape, 0, {.dtype = options.dtype.value_or(kFloat32), .device = options.device});
}

Tensor ones(const Shape& shape, TensorOptions options) {
  return full(shape, 1, {.dtype = options.dtype.value_or(kFloat32), .device = options.device});
}

Tensor scalar_tensor(const Scalar& value, TensorOptions options) { return full({}, value, options); }

Tensor empty_like(const Tensor& like, std::optional<TensorOptions> options) {
  return empty(like.shape(), {.dtype = options ? options->dtype.value_or(like.dtype()) : like.dtype(),
                              .device = options ? options->device : like.device()});
}

Tensor full_like(const Tensor& like, const Scalar& value, std::optional<TensorOptions> options) {
  Tensor result = empty_like(like, options);
  result.fill_(value);
  return result;
}

Tensor zeros_like(const Tensor& like, std::optional<TensorOptions> options) { return full_like(like, 0, options); }
Tensor ones_like(const Tensor& like, std::optional<TensorOptions> options) { return full_like(like, 1, options); }

Tensor arange(const Scalar& end, TensorOptions options) { return arange(0, end, 1, options); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options) {
  const bool integral = !start.is_floating_point() && !end.is_floating_point() && !step.is_floating_point();
  const DataType dtype = options.dtype.value_or(integral ? kInt64 : kFloat32);
  const double s = start.to<double>(), e = end.to<double>(), d = step.to<double>();
  if (!std::isfinite(s) || !std::isfinite(e) || !std::isfinite(d))
    throw Error("arange", concat("start ", start, ", end ", end, " and step ", step, " must be finite"));
  if (d == 0) throw Error("arange", "step must be nonzero");
  if ((d > 0 && e < s) || (d < 0 && e > s))
    throw Error("arange", concat("upper bound and step have inconsistent signs: start ", start, ", end ", end,
                                 ", step ", step));
  if (integral) {
    const std::int64_t a = start.to<std::int64_t>(), b = end.to<std::int64_t>(), c = step.to<std::int64_t>();
    // ceil((b - a) / c) in integers; the difference is computed in 128 bits so it cannot overflow.
    const __int128 span = static_cast<__int128>(b) - a;
    const __int128 count = c > 0 ? (span + c - 1) / c : (span + c + 1) / c;
    if (count > (std::int64_t{1} << 40))
      throw ShapeError("arange", concat("range of ", static_cast<std::int64_t>(count), " values is too large"));
    std::vector<std::int64_t> values(static_cast<std::size_t>(count));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = a + static_cast<std::int64_t>(i) * c;
    return from_vector(values, {}, {.dtype = dtype, .device = options.device});
  }
  const double count = std::ceil((e - s) / d);
  if (count > static_cast<double>(std::int64_t{1} << 40))
    throw ShapeError("arange", concat("range of ", count, " values is too large"));
  std::vector<double> values(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = s + static_cast<double>(i) * d;
  return from_host_values(values, {static_cast<std::int64_t>(values.size())}, {.dtype = dtype, .device = options.device});
}

Tensor linspace(double start, double end, std::int64_t steps, TensorOptions options) {
  if (steps < 0) throw ShapeError("linspace", concat("number of steps must be non-negative, got ", steps));
  std::vector<double> values(static_cast<std::size_t>(steps));
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Like PyTorch: the first half counts up from start, the second half down from end,
  // so both endpoints are exact; a single step is `start`.
  for (std::int64_t i = 0; i < steps; ++i)
    values[i] = steps == 1 || i < steps / 2 ? start + step * static_cast<double>(i)
                                            : end - step * static_cast<double>(steps - 1 - i);
  return from_host_values(values, {steps}, options);
}

Tensor eye(std::int64_t n, TensorOptions options) { return eye(n, n, options); }

Tensor eye(std::int64_t n, std::int64_t m, TensorOptions options) {
  Tensor result = zeros({n, m}, options);  // ShapeError for negative sizes
  result.diagonal().fill_(1);
  return result;
}

Tensor rand(const Shape& shape, TensorOptions options, Generator* generator) {
  const DataType dtype = options.dtype.value_or(kFloat32);
  check_floating("rand", dtype);
  return random_tensor<UniformKernel>(shape, dtype, options.device, generator, 0.0, 1.0);
}

Tensor randn(const Shape& shape, TensorOptions options, Generator* generator) {
  const DataType dtype = options.dtype.value_or(kFloat32);
  check_floating("randn", dtype);
  return random_tensor<NormalKernel>(shape, dtype, options.device, generator, 0.0, 1.0);
}

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, TensorOptions options, Generator* generator) {
  if (low >= high) throw Error("randint", concat("expected low < high, got low ", low, " and high ", high));
  const DataType dtype = options.dtype.value_or(kInt64);
  if (dtype == kBool) throw DTypeError("randint", "bool is not a valid dtype for randint");
  const bool representable = dispatch(dtype, [&]<class T>() {
    return !std::is_integral_v<T> ||
           (low >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
            high - 1 <= static_cast<std::int64_t>(std::numeric_limits<T>::max()));
  });
  if (!representable)
    throw DTypeError("randint", concat("range [", low, ", ", high, ") does not fit in ", dtype));
  return random_tensor<RandintKernel>(shape, dtype, options.device, generator, low, high);
}

Tensor from_blob(void* data, const Shape& shape, const Strides& strides, DataType dtype, Device device,
                 std::function<void(void*)> deleter) {
  if (shape.size() != strides.size())
    throw ShapeError("from_blob", concat("shape ", shape, " and strides ", strides, " differ in length"));
  // Bytes from the first to one past the last element, in 128 bits so it cannot overflow.
  __int128 extent = checked_numel("from_blob", shape) > 0 ? 1 : 0;
  for (std::size_t i = 0; i < shape.size() && extent > 0; ++i) {
    if (strides[i] < 0) throw ShapeError("from_blob", concat("negative strides are not supported: ", strides));
    extent += static_cast<__int128>(shape[i] - 1) * strides[i];
  }
  const __int128 nbytes = extent * static_cast<__int128>(itemsize(dtype));
  if (nbytes > std::numeric_limits<std::int64_t>::max())
    throw ShapeError("from_blob", concat("shape ", shape, " and strides ", strides, " span more than 2^63 bytes"));
  return Tensor(Storage::from_blob(data, static_cast<std::int64_t>(nbytes), device, std::move(deleter)), shape, strides, 0, dtype);
}

Tensor from_blob(void* data, const Shape& shape, DataType dtype, Device device, std::function<void(void*)> deleter) {
  return from_blob(data, shape, contiguous_strides(shape), dtype, device, std::move(deleter));
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace infini
