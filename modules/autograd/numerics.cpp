// The precision checker and --dump_numerics (numerics.cppm).
module;
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
module infini.autograd;
import infini.std;

namespace infini::numerics {
namespace {

bool env_checking() {
  const char* value = std::getenv("INFINI_CHECK_NUMERICS");
  return value && std::string_view(value) != "" && std::string_view(value) != "0";
}

std::atomic<bool> checking_on{env_checking()};
std::atomic<NumericsDump*> active_dump{nullptr};
std::mutex dump_mutex;  // guards the active dump's pending lines

struct Frame {
  const std::string* label;
  const std::string* type_name;
};
thread_local std::vector<Frame> module_stack;
thread_local int backward_nodes = 0;  // BackwardNodeScopes open on this thread

std::string number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", v);
  return buffer;
}

// "0: float32 [2, 3]: min ...; 1: ..." for the defined tensors of `list`.
std::string describe_list(const std::vector<Tensor>& list) {
  std::string out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].defined()) continue;
    out += concat(out.empty() ? "" : "; ", i, ": ", describe(list[i]));
  }
  return out.empty() ? "none" : out;
}

std::string where() {
  const std::string module = current_module();
  return module.empty() ? std::string("outside any module") : "in module " + module;
}

}  // namespace

bool checking() noexcept { return checking_on.load(std::memory_order_relaxed); }
void set_checking(bool on) noexcept { checking_on.store(on, std::memory_order_relaxed); }
bool dumping() noexcept { return active_dump.load(std::memory_order_relaxed) != nullptr; }

Stats stats_of(const Tensor& t) {
  Stats s;
  s.numel = t.numel();
  const Tensor values = t.detach().to(Device::cpu(), kFloat64).contiguous();
  const double* v = values.data_ptr<double>();
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0, squares = 0;
  std::int64_t finite = 0;
  for (std::int64_t i = 0; i < s.numel; ++i) {
    if (std::isnan(v[i])) {
      ++s.nan;
    } else if (std::isinf(v[i])) {
      ++s.inf;
    } else {
      lo = std::min(lo, v[i]);
      hi = std::max(hi, v[i]);
      sum += v[i];
      squares += v[i] * v[i];
      ++finite;
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.min = finite ? lo : nan;
  s.max = finite ? hi : nan;
  s.mean = finite ? sum / static_cast<double>(finite) : nan;
  s.rms = finite ? std::sqrt(squares / static_cast<double>(finite)) : nan;
  return s;
}

std::string describe(const Tensor& t) {
  const Stats s = stats_of(t);
  const std::string counts = concat(" (", s.nan, " NaN, ", s.inf, " Inf of ", s.numel, ")");
  if (s.nan + s.inf == s.numel) return concat(t.dtype(), " ", t.shape(), ": no finite value", counts);
  return concat(t.dtype(), " ", t.shape(), ": min ", number(s.min), " max ", number(s.max), " mean ", number(s.mean),
                counts);
}

bool all_finite(const Tensor& t) {
  if (!is_floating_point(t.dtype()) || t.numel() == 0) return true;
  // One pass: the sum is finite unless an element is not (or the sum overflows: then look).
  if (std::isfinite(kernels::reduce(ReduceOp::Sum, t).item<double>())) return true;
  return !kernels::reduce(ReduceOp::Any, kernels::unary(UnaryOp::IsNan, t)).item<bool>() &&
         !kernels::reduce(ReduceOp::Any, kernels::unary(UnaryOp::IsInf, t)).item<bool>();
}

ModuleScope::ModuleScope(const std::string& label, const std::string& type_name) {
  module_stack.push_back({&label, &type_name});
}
ModuleScope::~ModuleScope() { module_stack.pop_back(); }

BackwardNodeScope::BackwardNodeScope() { ++backward_nodes; }
BackwardNodeScope::~BackwardNodeScope() { --backward_nodes; }

std::string current_module() {
  if (module_stack.empty()) return {};
  const Frame& top = module_stack.back();
  return top.label->empty() ? *top.type_name : concat(*top.label, " (", *top.type_name, ")");
}

void check_forward(std::string_view op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  if (backward_nodes > 0) return;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined() || all_finite(outputs[i])) continue;
    throw Error("check_numerics", concat("op '", op, "' (forward) ", where(), ": output ", i, " is ",
                                         describe(outputs[i]), "; inputs: ", describe_list(inputs)));
  }
}

void check_backward(std::string_view node, std::string_view forward_op, const std::string& module,
                    const std::vector<Tensor>& incoming, const std::vector<Tensor>& gradients) {
  for (std::size_t i = 0; i < gradients.size(); ++i) {
    if (!gradients[i].defined() || all_finite(gradients[i])) continue;
    const std::string op = forward_op.empty() ? std::string(node) : concat("'", forward_op, "' (backward, ", node, ")");
    throw Error("check_numerics",
                concat("op ", op, forward_op.empty() ? " (backward)" : "", " ",
                       module.empty() ? std::string("outside any module") : "in module " + module, ": gradient ", i,
                       " is ", describe(gradients[i]), "; incoming gradients: ", describe_list(incoming)));
  }
}

// ---- NumericsDump ----

NumericsDump::NumericsDump(const std::filesystem::path& dir, int rank) {
  const std::string op = "NumericsDump";
  NumericsDump* none = nullptr;
  if (!active_dump.compare_exchange_strong(none, this))
    throw Error(op, concat("a dump to ", none->path_, " is already active in this process"));
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  path_ = dir / concat("rank_", rank, ".tsv");
  out_.open(path_, std::ios::trunc);
  if (!out_) {
    active_dump.store(nullptr);
    throw IOError(op, concat("cannot write ", path_, error ? " (" + error.message() + ")" : std::string()));
  }
  out_ << "step\tkind\tname\tdtype\tshape\tnumel\tnan\tinf\tmin\tmax\tmean\trms\n";
}

NumericsDump::~NumericsDump() { active_dump.store(nullptr); }

void NumericsDump::begin_step(std::int64_t step) {
  const std::lock_guard lock(dump_mutex);
  step_ = step;
  pending_.clear();
}

void NumericsDump::add(std::string_view kind, std::string_view name, const Tensor& t) {
  const Stats s = stats_of(t);
  const std::string line = concat(step_, "\t", kind, "\t", name, "\t", t.dtype(), "\t", t.shape(), "\t", s.numel, "\t",
                                  s.nan, "\t", s.inf, "\t", number(s.min), "\t", number(s.max), "\t", number(s.mean),
                                  "\t", number(s.rms), "\n");
  const std::lock_guard lock(dump_mutex);
  pending_ += line;
}

void NumericsDump::end_step(const std::vector<std::pair<std::string, Tensor>>& named_parameters) {
  for (const auto& [name, param] : named_parameters)
    if (param.grad().defined()) add("grad", name, param.grad());
  const std::lock_guard lock(dump_mutex);
  out_ << pending_;
  out_.flush();
  if (!out_) throw IOError("NumericsDump", concat("cannot write ", path_));
  pending_.clear();
}

void record_module_output(const std::string& label, const std::string& type_name, const Tensor& output) {
  NumericsDump* dump = active_dump.load(std::memory_order_relaxed);
  if (!dump || !output.defined()) return;
  dump->add("forward", label.empty() ? type_name : label, output);
}

}  // namespace infini::numerics
