// The precision checker and numerics dumps (InfiniTrain's precision checker, PyTorch's
// detect_anomaly extended to forward).
//
// Checking (INFINI_CHECK_NUMERICS=1 when the library loads, or set_checking(true); the
// trainers' --check_numerics): every op that records autograd history checks its outputs
// after forward, every backward node its gradients, and the first NaN or Inf raises an
// Error (op "check_numerics") naming the op, forward or backward, the module it ran in
// ("h.3.mlp.c_fc (Linear)", as nn::label_modules named it), the bad tensor's dtype, shape and
// counts, and min / max / mean of the op's inputs (in backward: of its incoming gradients).
//
// Dumping (NumericsDump, the trainers' --dump_numerics DIR): statistics of every module's
// output per call and of every parameter's gradient per step, one tab-separated file per
// rank, so that two runs (other layouts, dtypes, builds) can be compared line by line.
export module infini.autograd:numerics;
import infini.std;
import infini.kernels;

export namespace infini::numerics {

bool checking() noexcept;
void set_checking(bool on) noexcept;

// Checking on for a scope, then as it was (process-wide, like set_checking).
class CheckNumericsGuard {
 public:
  CheckNumericsGuard() : previous_(checking()) { set_checking(true); }
  ~CheckNumericsGuard() { set_checking(previous_); }
  CheckNumericsGuard(const CheckNumericsGuard&) = delete;
  CheckNumericsGuard& operator=(const CheckNumericsGuard&) = delete;

 private:
  bool previous_;
};

// Statistics of a tensor: min, max, mean and root-mean-square over its finite elements (NaN
// when it has none) and how many are NaN and infinite.
struct Stats {
  std::int64_t numel = 0, nan = 0, inf = 0;
  double min = 0, max = 0, mean = 0, rms = 0;
};
Stats stats_of(const Tensor& t);
// "float32 [2, 3]: min -1 max 2 mean 0.5 (1 NaN, 0 Inf of 6)"
std::string describe(const Tensor& t);
// Whether every element of a floating-point tensor is finite (other dtypes: true).
bool all_finite(const Tensor& t);

// The module whose forward runs on this thread, innermost; nn::Module::call opens one per
// call while checking or dumping. Labels must outlive the scope.
class ModuleScope {
 public:
  ModuleScope(const std::string& label, const std::string& type_name);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;
};
// "h.3.mlp.c_fc (Linear)", or "" outside every module.
std::string current_module();

// While a backward node runs (the engine opens one per node while checking), the ops inside
// it are not checked one by one: the node's gradients are, named by the node.
class BackwardNodeScope {
 public:
  BackwardNodeScope();
  ~BackwardNodeScope();
  BackwardNodeScope(const BackwardNodeScope&) = delete;
  BackwardNodeScope& operator=(const BackwardNodeScope&) = delete;
};

// Error when an output of forward op `op` is not finite (see above); nothing inside a
// backward node.
void check_forward(std::string_view op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);
// Error when a gradient a backward node returned is not finite. `module` is where its forward
// ran (FunctionNode::module), `forward_op` that op's name ("" when the node has none).
void check_backward(std::string_view node, std::string_view forward_op, const std::string& module,
                    const std::vector<Tensor>& incoming, const std::vector<Tensor>& gradients);

// --dump_numerics: writes <dir>/rank_<rank>.tsv, one line per module output and parameter
// gradient (columns in the header line). At most one dump is active per process.
class NumericsDump {
 public:
  NumericsDump(const std::filesystem::path& dir, int rank);
  ~NumericsDump();
  NumericsDump(const NumericsDump&) = delete;
  NumericsDump& operator=(const NumericsDump&) = delete;

  // Module outputs recorded from now on belong to `step`.
  void begin_step(std::int64_t step);
  // Adds the step's parameter gradients (undefined ones are left out) and writes the step.
  void end_step(const std::vector<std::pair<std::string, Tensor>>& named_parameters);
  const std::filesystem::path& path() const { return path_; }

 private:
  friend void record_module_output(const std::string&, const std::string&, const Tensor&);
  void add(std::string_view kind, std::string_view name, const Tensor& t);

  std::filesystem::path path_;
  std::ofstream out_;
  std::int64_t step_ = 0;
  std::string pending_;
};

bool dumping() noexcept;
// Adds one module's output to the active dump (nn::Module::call).
void record_module_output(const std::string& label, const std::string& type_name, const Tensor& output);

}  // namespace infini::numerics
