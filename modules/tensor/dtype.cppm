// DataType: the element types a Tensor can hold, their names and sizes, PyTorch's
// type promotion, and dispatch from a runtime DataType to a C++ type.
export module infini.tensor:dtype;
import infini.std;
import :error;
import :half;

export namespace infini {

enum class DataType : std::uint8_t { Bool, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64 };
inline constexpr int kDataTypeCount = 10;

inline constexpr DataType kBool = DataType::Bool;
inline constexpr DataType kUInt8 = DataType::UInt8;
inline constexpr DataType kInt8 = DataType::Int8;
inline constexpr DataType kInt16 = DataType::Int16;
inline constexpr DataType kInt32 = DataType::Int32;
inline constexpr DataType kInt64 = DataType::Int64;
inline constexpr DataType kFloat16 = DataType::Float16;
inline constexpr DataType kBFloat16 = DataType::BFloat16;
inline constexpr DataType kFloat32 = DataType::Float32;
inline constexpr DataType kFloat64 = DataType::Float64;

constexpr std::size_t itemsize(DataType t) noexcept {
  constexpr std::size_t sizes[kDataTypeCount] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  return sizes[static_cast<int>(t)];
}

// PyTorch's names without the "torch." prefix: "float32", "bfloat16", "int64", "bool", ...
constexpr std::string_view name(DataType t) noexcept {
  constexpr std::string_view names[kDataTypeCount] = {"bool",    "uint8",    "int8",    "int16",   "int32",
                                                      "int64",   "float16",  "bfloat16", "float32", "float64"};
  return names[static_cast<int>(t)];
}

inline std::ostream& operator<<(std::ostream& out, DataType t) { return out << name(t); }

constexpr bool is_floating_point(DataType t) noexcept {
  return t == kFloat16 || t == kBFloat16 || t == kFloat32 || t == kFloat64;
}
constexpr bool is_integral(DataType t, bool include_bool = false) noexcept {
  return t == kBool ? include_bool : !is_floating_point(t);
}
constexpr bool is_signed(DataType t) noexcept { return t != kBool && t != kUInt8; }

// PyTorch's promote_types: bool < integers < floating point; uint8 with int8 gives int16;
// float16 with bfloat16 gives float32; otherwise the wider type of the same kind wins.
constexpr DataType promote_types(DataType a, DataType b) noexcept {
  if (a == b) return a;
  if (a == kBool) return b;
  if (b == kBool) return a;
  const bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa != fb) return fa ? a : b;
  if (fa) {
    if ((a == kFloat16 && b == kBFloat16) || (a == kBFloat16 && b == kFloat16)) return kFloat32;
    return itemsize(a) >= itemsize(b) ? a : b;
  }
  if ((a == kUInt8 && b == kInt8) || (a == kInt8 && b == kUInt8)) return kInt16;
  if (a == kUInt8) return b;  // every other signed integer holds all of uint8
  if (b == kUInt8) return a;
  return itemsize(a) >= itemsize(b) ? a : b;
}

// C++ element type of a DataType, and back.
template <DataType T> struct CppTypeOf;
template <> struct CppTypeOf<kBool> { using type = bool; };
template <> struct CppTypeOf<kUInt8> { using type = std::uint8_t; };
template <> struct CppTypeOf<kInt8> { using type = std::int8_t; };
template <> struct CppTypeOf<kInt16> { using type = std::int16_t; };
template <> struct CppTypeOf<kInt32> { using type = std::int32_t; };
template <> struct CppTypeOf<kInt64> { using type = std::int64_t; };
template <> struct CppTypeOf<kFloat16> { using type = Half; };
template <> struct CppTypeOf<kBFloat16> { using type = BFloat16; };
template <> struct CppTypeOf<kFloat32> { using type = float; };
template <> struct CppTypeOf<kFloat64> { using type = double; };
template <DataType T> using CppType = typename CppTypeOf<T>::type;

template <class T> constexpr DataType data_type_of() noexcept;
template <> constexpr DataType data_type_of<bool>() noexcept { return kBool; }
template <> constexpr DataType data_type_of<std::uint8_t>() noexcept { return kUInt8; }
template <> constexpr DataType data_type_of<std::int8_t>() noexcept { return kInt8; }
template <> constexpr DataType data_type_of<std::int16_t>() noexcept { return kInt16; }
template <> constexpr DataType data_type_of<std::int32_t>() noexcept { return kInt32; }
template <> constexpr DataType data_type_of<std::int64_t>() noexcept { return kInt64; }
template <> constexpr DataType data_type_of<Half>() noexcept { return kFloat16; }
template <> constexpr DataType data_type_of<BFloat16>() noexcept { return kBFloat16; }
template <> constexpr DataType data_type_of<float>() noexcept { return kFloat32; }
template <> constexpr DataType data_type_of<double>() noexcept { return kFloat64; }

// Calls fn.template operator()<T>() with T the C++ type of `t`: the one switch over
// the fixed list of types that kernels use, e.g. dispatch(t, [&]<class T> { ... }).
template <class Fn>
decltype(auto) dispatch(DataType t, Fn&& fn) {
  switch (t) {
    case kBool: return fn.template operator()<bool>();
    case kUInt8: return fn.template operator()<std::uint8_t>();
    case kInt8: return fn.template operator()<std::int8_t>();
    case kInt16: return fn.template operator()<std::int16_t>();
    case kInt32: return fn.template operator()<std::int32_t>();
    case kInt64: return fn.template operator()<std::int64_t>();
    case kFloat16: return fn.template operator()<Half>();
    case kBFloat16: return fn.template operator()<BFloat16>();
    case kFloat32: return fn.template operator()<float>();
    case kFloat64: return fn.template operator()<double>();
  }
  throw DTypeError("dispatch", concat("invalid data type code ", static_cast<int>(t)));
}

}  // namespace infini
