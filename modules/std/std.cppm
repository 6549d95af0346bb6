// infini.std: the C++ standard library names Infini's module interfaces use, included once,
// here. Every other interface unit imports them from this module instead of including the
// headers in its global module fragment.
//
// Why: clang 19 writes every standard declaration a unit includes into that unit's BMI, and a
// unit that includes <vector> and also imports a module that included it spends 10-20 s
// merging the two copies while it writes its BMI (measured: a 5-line partition that includes
// <vector> and imports infini.nn took 10.3 s, 0.16 s without the include). With one copy of
// the standard library, in this module's BMI, no interface unit merges.
//
// Import semantics: a name is usable only if exported here, so are the operators and the
// functions found by argument-dependent lookup (operator==, get, swap, ...). Macros do not
// cross a module boundary: units that need one (UINT64_MAX, assert) include its C header.
// This is a subset of what `import std;` (C++23, not in libstdc++ 12) gives: add a name here
// when an interface needs it.
module;
#include <algorithm>
#include <any>
#include <array>
#include <atomic>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <compare>
#include <condition_variable>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <numbers>
#include <numeric>
#include <queue>
#include <ratio>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <shared_mutex>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>
export module infini.std;

export namespace std {
// The names are using-declarations in an inline namespace of std: `std::vector` finds them,
// and so does argument-dependent lookup. In std itself they would clash with libstdc++'s
// friend declarations (make_shared in shared_ptr, operator== in set) when a unit also sees a
// second copy of the library (an implementation unit's own #include <cmath>, a third-party
// header): clang 19 reports "cannot befriend target of using declaration".
inline namespace infini_exports {
// Operators and the customisation points that argument-dependent lookup finds (strings,
// containers, smart pointers, optional, tuple, byte, iostream flags, reverse iterators).
using std::operator==;
using std::operator!=;
using std::operator<;
using std::operator>;
using std::operator<=;
using std::operator>=;
using std::operator<=>;
using std::operator+;
using std::operator-;
using std::operator<<;
using std::operator>>;
using std::operator|;
using std::operator&;
using std::operator^;
using std::operator~;
using std::operator|=;
using std::operator&=;
using std::operator^=;
using std::begin;
using std::data;
using std::end;
using std::get;
using std::hash;
using std::size;
using std::swap;
using std::tuple_element;
using std::tuple_size;

// Language support: what the compiler itself looks up in std.
using std::align_val_t;
using std::bad_alloc;
using std::coroutine_handle;
using std::coroutine_traits;
using std::destroying_delete_t;
using std::initializer_list;
using std::noop_coroutine;
using std::nothrow;
using std::nothrow_t;
using std::nullptr_t;
using std::partial_ordering;
using std::strong_ordering;
using std::suspend_always;
using std::suspend_never;
using std::type_info;
using std::weak_ordering;

// <cstddef>, <cstdint>
using std::byte;
using std::int16_t;
using std::int32_t;
using std::int64_t;
using std::int8_t;
using std::ptrdiff_t;
using std::size_t;
using std::to_integer;
using std::uint16_t;
using std::uint32_t;
using std::uint64_t;
using std::uint8_t;
using std::uintmax_t;
using std::uintptr_t;

// <type_traits>, <concepts>, <limits>, <bit>, <ratio>
using std::bit_cast;
using std::bit_floor;
using std::conditional_t;
using std::constructible_from;
using std::convertible_to;
using std::decay_t;
using std::endian;
using std::false_type;
using std::integral;
using std::invoke_result_t;
using std::is_floating_point_v;
using std::is_integral_v;
using std::is_pointer_v;
using std::is_same_v;
using std::is_signed_v;
using std::make_signed_t;
using std::make_unsigned_t;
using std::milli;
using std::numeric_limits;
using std::remove_cvref_t;
using std::remove_pointer_t;
using std::same_as;
using std::true_type;

// <utility>, <tuple>, <functional>, <any>, <optional>, <variant>
using std::any;
using std::any_cast;
using std::equal_to;
using std::exchange;
using std::forward;
using std::function;
using std::get_if;
using std::in_place;
using std::less;
using std::make_pair;
using std::move;
using std::multiplies;
using std::nullopt;
using std::nullopt_t;
using std::optional;
using std::pair;
using std::tuple;
using std::variant;
using std::visit;

// <memory>
using std::dynamic_pointer_cast;
using std::enable_shared_from_this;
using std::make_shared;
using std::make_unique;
using std::shared_ptr;
using std::static_pointer_cast;
using std::unique_ptr;
using std::weak_ptr;

// Containers, strings and views: <array>, <vector>, <map>, <set>, <unordered_map>,
// <unordered_set>, <queue>, <span>, <string>, <string_view>, <charconv>, <iterator>
using std::array;
using std::as_bytes;
using std::default_sentinel_t;
using std::erase_if;
using std::from_chars;
using std::istreambuf_iterator;
using std::map;
using std::priority_queue;
using std::set;
using std::span;
using std::stoul;
using std::string;
using std::string_view;
using std::to_string;
using std::unordered_map;
using std::unordered_set;
using std::vector;

// <algorithm>, <numeric>, <cmath>
using std::abs;
using std::accumulate;
using std::all_of;
using std::any_of;
using std::binary_search;
using std::clamp;
using std::copy;
using std::copy_n;
using std::count;
using std::equal;
using std::fill;
using std::fill_n;
using std::find;
using std::find_if;
using std::iota;
using std::isnan;
using std::max;
using std::max_element;
using std::min;
using std::nextafter;
using std::nth_element;
using std::partial_sort;
using std::reverse;
using std::sort;
using std::upper_bound;

// <exception>, <stdexcept>, <system_error>
using std::current_exception;
using std::errc;
using std::error_code;
using std::exception;
using std::exception_ptr;
using std::generic_category;
using std::make_exception_ptr;
using std::rethrow_exception;
using std::runtime_error;

// Threads and atomics: <atomic>, <condition_variable>, <mutex>, <shared_mutex>, <thread>
using std::atomic;
using std::condition_variable;
using std::lock_guard;
using std::memory_order;
using std::memory_order_acquire;
using std::memory_order_relaxed;
using std::memory_order_release;
using std::memory_order_seq_cst;
using std::mutex;
using std::shared_lock;
using std::shared_mutex;
using std::thread;
using std::unique_lock;

// Streams: <ostream>, <fstream>, <sstream>
using std::ifstream;
using std::ios;
using std::ofstream;
using std::ostream;
using std::ostringstream;
using std::streamsize;
}  // namespace infini_exports

namespace chrono {
inline namespace infini_exports {
using std::chrono::duration;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using std::chrono::operator==;
using std::chrono::operator<=>;
using std::chrono::operator<;
using std::chrono::operator+;
using std::chrono::operator-;
using std::chrono::operator*;
using std::chrono::operator/;
using std::chrono::operator%;
}  // namespace infini_exports
}  // namespace chrono

namespace filesystem {
inline namespace infini_exports {
using std::filesystem::create_directories;
using std::filesystem::exists;
using std::filesystem::file_size;
using std::filesystem::path;  // its operators are hidden friends, found through the class
using std::filesystem::remove;
using std::filesystem::remove_all;
using std::filesystem::rename;
}  // namespace infini_exports
}  // namespace filesystem

namespace numbers {
inline namespace infini_exports {
using std::numbers::inv_sqrtpi;
using std::numbers::ln2;
using std::numbers::pi;
using std::numbers::sqrt2;
}  // namespace infini_exports
}  // namespace numbers

namespace ranges {
inline namespace infini_exports {
using std::ranges::any_of;
using std::ranges::fill;
using std::ranges::find;
using std::ranges::find_if;
using std::ranges::find_if_not;
using std::ranges::minmax;
using std::ranges::none_of;
using std::ranges::sort;
using std::ranges::transform;
}  // namespace infini_exports
}  // namespace ranges

namespace this_thread {
inline namespace infini_exports {
using std::this_thread::sleep_for;
using std::this_thread::yield;
}  // namespace infini_exports
}  // namespace this_thread
}  // namespace std

// libstdc++'s vector and string iterators (__gnu_cxx::__normal_iterator) keep their
// comparisons and arithmetic in their own namespace.
export namespace __gnu_cxx {
inline namespace infini_exports {
using __gnu_cxx::operator==;
using __gnu_cxx::operator<=>;
using __gnu_cxx::operator-;
using __gnu_cxx::operator+;
}  // namespace infini_exports
}  // namespace __gnu_cxx
