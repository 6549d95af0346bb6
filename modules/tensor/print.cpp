// Tensor::str(): PyTorch's repr (torch/_tensor_str.py). Elements share one width and one
// format, chosen from the values shown: integers as is; floating point as "1." when every
// value is integral, "%.4f" otherwise, "%.4e" when the magnitudes span more than 1000x,
// exceed 1e8 or go below 1e-4. As in PyTorch the width of floating-point elements comes
// from the nonzero finite values only (nan, inf and 0 are padded to it, never widen it).
// Tensors with more than 1000 elements show 3 items at each edge of each dim.
module;
#include <cmath>
#include <cstdint>
#include <cstdio>
module infini.tensor;
import infini.std;

namespace infini {
namespace {

constexpr std::int64_t kThreshold = 1000;
constexpr std::int64_t kEdgeItems = 3;
constexpr std::size_t kLineWidth = 80;

// Indices shown along a dim of `size`: all, or the first and last kEdgeItems (-1 marks "...").
std::vector<std::int64_t> shown_indices(std::int64_t size, bool summarize) {
  std::vector<std::int64_t> idx;
  if (summarize && size > 2 * kEdgeItems) {
    for (std::int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);
    for (std::int64_t i = size - kEdgeItems; i < size; ++i) idx.push_back(i);
  } else {
    for (std::int64_t i = 0; i < size; ++i) idx.push_back(i);
  }
  return idx;
}

std::string format_double(const char* format, double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

class Formatter {
 public:
  Formatter(const std::vector<Scalar>& shown, DataType dtype) : floating_(is_floating_point(dtype)), bool_(dtype == kBool) {
    if (!floating_) return;
    std::vector<double> finite_nonzero;
    bool all_integral = true;
    for (const Scalar& s : shown) {
      const double v = s.to<double>();
      if (!std::isfinite(v)) continue;
      if (v != std::ceil(v)) all_integral = false;
      if (v != 0) finite_nonzero.push_back(std::abs(v));
    }
    int_mode_ = all_integral;
    if (finite_nonzero.empty()) return;
    const auto [lo, hi] = std::ranges::minmax(finite_nonzero);
    sci_mode_ = hi / lo > 1000.0 || hi > 1e8 || (!int_mode_ && lo < 1e-4);
  }

  // The width every element is padded to: the widest shown value (floating point: the
  // widest nonzero finite one), at least 1.
  std::size_t width(const std::vector<Scalar>& shown) const {
    std::size_t width = 1;
    for (const Scalar& s : shown) {
      if (floating_) {
        const double v = s.to<double>();
        if (v == 0 || !std::isfinite(v)) continue;
      }
      width = std::max(width, (*this)(s).size());
    }
    return width;
  }

  std::string operator()(const Scalar& s) const {
    if (bool_) return s.to<bool>() ? "True" : "False";
    if (!floating_) return std::to_string(s.to<std::int64_t>());
    const double v = s.to<double>();
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode_) return format_double("%.4e", v);
    if (int_mode_) return format_double("%.0f", v) + ".";
    return format_double("%.4f", v);
  }

 private:
  bool floating_, bool_;
  bool int_mode_ = false, sci_mode_ = false;
};

void collect(const Tensor& t, bool summarize, std::vector<Scalar>& out) {
  if (t.dim() == 0) {
    out.push_back(t.item());
    return;
  }
  for (std::int64_t i : shown_indices(t.size(0), summarize))
    if (i >= 0) collect(t.select(0, i), summarize, out);
}

std::string render(const Tensor& t, bool summarize, const Formatter& fmt, std::size_t width, std::size_t indent) {
  auto element = [&](const Tensor& e) {
    std::string s = fmt(e.item());
    return std::string(width - std::min(width, s.size()), ' ') + s;
  };
  if (t.dim() == 0) return element(t);
  const auto idx = shown_indices(t.size(0), summarize);
  std::string out = "[";
  if (t.dim() == 1) {
    const std::size_t per_line = std::max<std::size_t>(1, (kLineWidth - std::min(kLineWidth, indent)) / (width + 2));
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (k > 0) out += k % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
      out += idx[k] < 0 ? " ..." : element(t.select(0, idx[k]));  // PyTorch pads "..." in rows
    }
    return out + "]";
  }
  const std::string separator = "," + std::string(static_cast<std::size_t>(t.dim() - 1), '\n') + std::string(indent + 1, ' ');
  for (std::size_t k = 0; k < idx.size(); ++k) {
    if (k > 0) out += separator;
    out += idx[k] < 0 ? "..." : render(t.select(0, idx[k]), summarize, fmt, width, indent + 1);
  }
  return out + "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  std::vector<std::string> suffixes;
  if (!device().is_cpu()) suffixes.push_back("device='" + device().str() + "'");
  std::string body;
  if (numel() == 0) {
    body = "[]";
    if (dim() != 1) {
      std::string size = "size=(";
      for (std::int64_t d = 0; d < dim(); ++d) size += (d ? ", " : "") + std::to_string(shape()[d]);
      suffixes.push_back(size + (dim() == 1 ? ",)" : ")"));
    }
  } else {
    const Tensor host = to(Device::cpu(), is_floating_point(dtype()) ? kFloat64 : dtype());
    const bool summarize = numel() > kThreshold;
    std::vector<Scalar> shown;
    collect(host, summarize, shown);
    const Formatter fmt(shown, dtype());
    body = render(host, summarize, fmt, fmt.width(shown), prefix.size());
  }
  // An empty tensor has no values to tell int64 or bool from float32, so only float32 goes unnamed.
  const bool default_dtype =
      dtype() == kFloat32 || (numel() > 0 && (dtype() == kInt64 || dtype() == kBool));
  if (!default_dtype) suffixes.push_back("dtype=" + std::string(name(dtype())));
  std::string out = prefix + body;
  for (const auto& s : suffixes) out += ", " + s;
  return out + ")";
}

}  // namespace infini
