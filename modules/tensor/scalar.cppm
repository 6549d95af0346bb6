// Scalar: one number of any kind (bool, integer, floating point), as taken by fill_,
// full and returned by item(). Integers are held as int64 so they round-trip exactly.
export module infini.tensor:scalar;
import infini.std;
import :dtype;
import :half;

export namespace infini {

// double -> float rounding toward zero with the last bit set when inexact ("round to odd").
// Rounding that float again to a format with at least two fewer mantissa bits (f16, bf16)
// gives the correctly rounded result of a single rounding from double.
inline float round_to_odd_float(double d) noexcept {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::abs(static_cast<double>(f)) > std::abs(d)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 1u);
}

// Converts between element types with defined results everywhere: floating point to
// integer truncates toward zero, saturates at the type's limits and maps NaN to 0
// (what CUDA's conversion instructions do); anything to bool is `!= 0`.
template <class To, class From>
inline To convert(From x) noexcept {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return convert<To>(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    if constexpr (std::is_same_v<From, double> || std::is_same_v<From, std::int64_t> ||
                  std::is_same_v<From, std::int32_t>)
      return To(round_to_odd_float(static_cast<double>(x)));  // one rounding, like CUDA's __double2half
    else
      return To(static_cast<float>(x));  // exact: every other source type fits in float
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (std::isnan(x)) return 0;
    if (x <= static_cast<From>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (x >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

class Scalar {
 public:
  enum class Kind : std::uint8_t { Bool, Int, Float };

  constexpr Scalar() = default;
  constexpr Scalar(bool v) noexcept : kind_(Kind::Bool), i_(v) {}
  template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  constexpr Scalar(T v) noexcept : kind_(Kind::Int), i_(static_cast<std::int64_t>(v)) {}
  template <class T>
    requires std::is_floating_point_v<T>
  constexpr Scalar(T v) noexcept : kind_(Kind::Float), d_(static_cast<double>(v)) {}
  constexpr Scalar(Half v) noexcept : kind_(Kind::Float), d_(static_cast<float>(v)) {}
  constexpr Scalar(BFloat16 v) noexcept : kind_(Kind::Float), d_(static_cast<float>(v)) {}

  constexpr Kind kind() const noexcept { return kind_; }
  constexpr bool is_floating_point() const noexcept { return kind_ == Kind::Float; }
  constexpr bool is_integral() const noexcept { return kind_ == Kind::Int; }
  constexpr bool is_bool() const noexcept { return kind_ == Kind::Bool; }

  // The value as T, converted like an element copy (see convert()).
  template <class T>
  T to() const noexcept {
    if (kind_ == Kind::Float) return convert<T>(d_);
    if (kind_ == Kind::Bool) return convert<T>(i_ != 0);
    return convert<T>(i_);
  }

  // The dtype a tensor built from this scalar gets by default (PyTorch: bool, int64, float32).
  constexpr DataType default_dtype() const noexcept {
    return kind_ == Kind::Bool ? kBool : kind_ == Kind::Int ? kInt64 : kFloat32;
  }

  friend std::ostream& operator<<(std::ostream& out, const Scalar& s) {
    if (s.kind_ == Kind::Bool) return out << (s.i_ ? "True" : "False");
    if (s.kind_ == Kind::Int) return out << s.i_;
    return out << s.d_;
  }

 private:
  Kind kind_ = Kind::Int;
  std::int64_t i_ = 0;
  double d_ = 0.0;
};

}  // namespace infini
