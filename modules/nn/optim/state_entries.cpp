// StateWriter / StateReader (see state_entries.cppm).
module;
#include <cmath>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::optim {

void StateWriter::tensor(std::string_view key, const Tensor& value) {
  out_.insert_or_assign(prefix_ + std::string(key), value.detach().clone());
}

void StateWriter::real(std::string_view key, double value) {
  out_.insert_or_assign(prefix_ + std::string(key), scalar_tensor(value, {.dtype = kFloat64}));
}

void StateWriter::integer(std::string_view key, std::int64_t value) {
  out_.insert_or_assign(prefix_ + std::string(key), scalar_tensor(value, {.dtype = kInt64}));
}

void StateWriter::flag(std::string_view key, bool value) { integer(key, value ? 1 : 0); }

void StateWriter::reals(std::string_view key, const std::vector<double>& values) {
  out_.insert_or_assign(prefix_ + std::string(key), from_vector(values));
}

void StateWriter::integers(std::string_view key, const std::vector<std::int64_t>& values) {
  out_.insert_or_assign(prefix_ + std::string(key), from_vector(values));
}

StateReader::StateReader(std::string op, std::string prefix, const StateDict& entries)
    : op_(std::move(op)), prefix_(std::move(prefix)) {
  for (const auto& [key, value] : entries) {
    if (!key.starts_with(prefix_))
      throw Error(op_, concat("unexpected key \"", key, "\" (expected keys starting with \"", prefix_, "\")"));
    add(key.substr(prefix_.size()), value);
  }
}

void StateReader::add(std::string key, Tensor value) {
  if (!value.defined()) throw Error(op_, concat("entry \"", full_key(key), "\" is an undefined tensor"));
  entries_.insert_or_assign(std::move(key), std::move(value));
}

Tensor StateReader::tensor(std::string_view key) {
  const auto it = entries_.find(key);
  if (it == entries_.end()) throw Error(op_, concat("missing key \"", full_key(key), "\""));
  used_.emplace(key);
  return it->second;
}

Tensor StateReader::tensor_like(std::string_view key, const Tensor& like) {
  const Tensor value = tensor(key);
  if (!is_floating_point(value.dtype()))
    throw DTypeError(op_, concat("\"", full_key(key), "\" has dtype ", value.dtype(), ", expected a floating-point ",
                                 "tensor (it is converted to the parameter's ", like.dtype(), ")"));
  if (value.shape() != like.shape())
    throw ShapeError(op_, concat("\"", full_key(key), "\" has shape ", value.shape(), ", expected the parameter's ",
                                 like.shape()));
  Tensor out = empty(like.shape(), {.dtype = like.dtype(), .device = like.device()});
  NoGradGuard no_grad;
  out.copy_(value);
  return out;
}

Tensor StateReader::scalar(std::string_view key) {
  Tensor value = tensor(key);
  if (value.dim() != 0)
    throw ShapeError(op_, concat("\"", full_key(key), "\" has shape ", value.shape(), ", expected a 0-d tensor"));
  return value;
}

double StateReader::real(std::string_view key) {
  const Tensor value = scalar(key);
  if (!is_floating_point(value.dtype()))
    throw DTypeError(op_, concat("\"", full_key(key), "\" has dtype ", value.dtype(), ", expected a floating-point ",
                                 "scalar (float64)"));
  return value.item<double>();
}

std::int64_t StateReader::integer(std::string_view key) {
  const Tensor value = scalar(key);
  if (value.dtype() == kBool)
    throw DTypeError(op_, concat("\"", full_key(key), "\" has dtype bool, expected an integer scalar (int64)"));
  if (!is_floating_point(value.dtype())) return value.item<std::int64_t>();
  const double v = value.item<double>();
  // Floating counts (PyTorch's float32 "step") are accepted when they hold an exact integer.
  if (!(std::abs(v) < 9.007199254740992e15) || v != std::trunc(v))
    throw Error(op_, concat("\"", full_key(key), "\" holds ", v, ", expected an integer"));
  return static_cast<std::int64_t>(v);
}

bool StateReader::flag(std::string_view key) {
  const Tensor value = scalar(key);
  if (is_floating_point(value.dtype()))
    throw DTypeError(op_, concat("\"", full_key(key), "\" has dtype ", value.dtype(), ", expected an int64 flag"));
  const std::int64_t v = value.item<std::int64_t>();
  if (v != 0 && v != 1) throw Error(op_, concat("\"", full_key(key), "\" holds ", v, ", expected a flag (0 or 1)"));
  return v == 1;
}

std::vector<double> StateReader::reals(std::string_view key, std::int64_t count) {
  const Tensor value = tensor(key);
  if (!is_floating_point(value.dtype()))
    throw DTypeError(op_, concat("\"", full_key(key), "\" has dtype ", value.dtype(), ", expected float64"));
  if (value.dim() != 1 || value.numel() != count)
    throw ShapeError(op_, concat("\"", full_key(key), "\" has shape ", value.shape(), ", expected [", count, "]"));
  const Tensor host = value.to(Device::cpu(), kFloat64).contiguous();
  const double* data = host.data_ptr<double>();
  return std::vector<double>(data, data + count);
}

std::vector<std::int64_t> StateReader::integers(std::string_view key) {
  const Tensor value = tensor(key);
  if (is_floating_point(value.dtype()) || value.dtype() == kBool)
    throw DTypeError(op_, concat("\"", full_key(key), "\" has dtype ", value.dtype(), ", expected int64"));
  if (value.dim() != 1)
    throw ShapeError(op_, concat("\"", full_key(key), "\" has shape ", value.shape(), ", expected a 1-d tensor"));
  const Tensor host = value.to(Device::cpu(), kInt64).contiguous();
  const std::int64_t* data = host.data_ptr<std::int64_t>();
  return std::vector<std::int64_t>(data, data + host.numel());
}

void StateReader::finish() const {
  std::string unknown;
  for (const auto& [key, value] : entries_)
    if (!used_.contains(key)) unknown += (unknown.empty() ? "\"" : ", \"") + full_key(key) + "\"";
  if (!unknown.empty()) throw Error(op_, concat("unexpected key(s) ", unknown));
}

}  // namespace infini::optim
