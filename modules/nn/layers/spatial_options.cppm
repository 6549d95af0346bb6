// The window options of the conv and pooling layers (internal to their .cpp files): checks,
// conversion back to ExpandingArray for the functional ops, and formatting for extra_repr().
export module infini.nn:spatial_options;
import infini.std;
import infini.autograd;

namespace infini::nn::spatial_options {

// ShapeError naming `layer` unless every entry of the option `what` is >= min.
inline void check_option_at_least(std::string_view layer, std::string_view what,
                                  const std::vector<std::int64_t>& values, std::int64_t min) {
  for (std::int64_t v : values)
    if (v < min) throw ShapeError(layer, concat(what, " must be >= ", min, ", got ", values));
}

// PyTorch's tuple printing: "(3, 3)", "(3,)".
inline std::string tuple_str(const std::vector<std::int64_t>& values) {
  std::string out = "(";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + (values.size() == 1 ? ",)" : ")");
}

// One value when all are equal ("2"), else the tuple ("(2, 1)").
inline std::string compact_str(const std::vector<std::int64_t>& values) {
  for (std::int64_t v : values)
    if (v != values.front()) return tuple_str(values);
  return std::to_string(values.front());
}

inline std::string bool_str(bool value) { return value ? "true" : "false"; }

// The values of an ExpandingArray<D> argument, for calling the functional ops.
template <std::size_t D>
ExpandingArray<D> expanding(const std::vector<std::int64_t>& v) {
  if constexpr (D == 1) return ExpandingArray<1>(v[0]);
  else if constexpr (D == 2) return ExpandingArray<2>(v[0], v[1]);
  else return ExpandingArray<3>(v[0], v[1], v[2]);
}

}  // namespace infini::nn::spatial_options
