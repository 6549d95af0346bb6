// Errors: every failure on user input is an infini::Error (or a subclass) whose
// message names the op, the offending shapes/dtypes/devices and what was expected.
export module infini.tensor:error;
import infini.std;

export namespace infini {

class Error : public std::runtime_error {
 public:
  // what() reads "<op>: <message>".
  Error(std::string_view op, std::string_view message)
      : std::runtime_error(std::string(op) + ": " + std::string(message)), op_(op) {}
  const std::string& op() const noexcept { return op_; }

 private:
  std::string op_;
};

class ShapeError : public Error { using Error::Error; };
class DTypeError : public Error { using Error::Error; };
class DeviceError : public Error { using Error::Error; };
class IndexError : public Error { using Error::Error; };
class IOError : public Error { using Error::Error; };
class OutOfMemoryError : public Error { using Error::Error; };

// "[2, 3, 4]"
inline std::string shape_str(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Builds a message from anything with an operator<< (vectors of int64 print as shapes).
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  auto put = [&out]<class P>(const P& p) {
    if constexpr (std::is_same_v<P, std::vector<std::int64_t>>) out << shape_str(p);
    else out << p;
  };
  (put(parts), ...);
  return out.str();
}

}  // namespace infini
