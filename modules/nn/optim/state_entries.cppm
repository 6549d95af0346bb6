// Reading and writing the entries of one part of a StateDict: an optimizer's param group
// ("param_groups.0.lr", ...), one parameter's state ("state.3.exp_avg", ...) or a grad
// scaler's fields. Scalars are 0-d tensors (float64 for reals, int64 for counts and flags),
// lists are 1-d. The reader checks dtypes and shapes, names the full key in every error and
// reports the keys nobody asked for, so a load can reject unknown entries.
export module infini.nn:state_entries;
import infini.std;
import :state_dict;

export namespace infini::optim {

class StateWriter {
 public:
  // Writes "<prefix><key>" entries into `out` (prefix e.g. "param_groups.0.", or empty).
  StateWriter(StateDict& out, std::string prefix) : out_(out), prefix_(std::move(prefix)) {}

  void tensor(std::string_view key, const Tensor& value);  // stores a contiguous copy
  void real(std::string_view key, double value);           // 0-d float64
  void integer(std::string_view key, std::int64_t value);  // 0-d int64
  void flag(std::string_view key, bool value);             // 0-d int64, 0 or 1
  void reals(std::string_view key, const std::vector<double>& values);          // 1-d float64
  void integers(std::string_view key, const std::vector<std::int64_t>& values);  // 1-d int64

 private:
  StateDict& out_;
  std::string prefix_;
};

class StateReader {
 public:
  // `op` names the loading function in errors ("Adam.load_state_dict"); `prefix` is what the
  // entries' keys had in front of them in the state dict.
  StateReader(std::string op, std::string prefix) : op_(std::move(op)), prefix_(std::move(prefix)) {}
  // Reads `key` -> value entries of a whole state dict whose keys all start with `prefix`.
  StateReader(std::string op, std::string prefix, const StateDict& entries);

  // Adds one entry (key without the prefix).
  void add(std::string key, Tensor value);
  bool contains(std::string_view key) const { return entries_.contains(key); }
  const std::string& prefix() const { return prefix_; }

  // Each read marks the key as used; a missing key is an Error naming it.
  Tensor tensor(std::string_view key);
  // A new contiguous tensor with the entry's values in `like`'s dtype and device (floating
  // entries only: DTypeError otherwise; ShapeError unless the shape equals like's).
  Tensor tensor_like(std::string_view key, const Tensor& like);
  double real(std::string_view key);                // 0-d floating point
  std::int64_t integer(std::string_view key);       // 0-d integer, or floating with an integral value
  bool flag(std::string_view key);                  // 0-d integer or bool holding 0 or 1
  std::vector<double> reals(std::string_view key, std::int64_t count);  // 1-d floating, `count` long
  std::vector<std::int64_t> integers(std::string_view key);           // 1-d integer

  // Error naming every key no read asked for.
  void finish() const;

 private:
  std::string full_key(std::string_view key) const { return prefix_ + std::string(key); }
  Tensor scalar(std::string_view key);  // a 0-d entry

  std::string op_, prefix_;
  std::map<std::string, Tensor, std::less<>> entries_;
  std::set<std::string, std::less<>> used_;
};

}  // namespace infini::optim
