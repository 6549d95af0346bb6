// Module: the base of every layer and model. A module owns named parameters (tensors that
// require grad), buffers (state such as running means) and child modules, all kept in
// registration order; everything else (parameters(), state_dict(), to(), train()) walks
// that tree. Modules live in shared_ptrs; ModuleHolder<Impl> is the cheap-to-copy handle
// users hold (`nn::Linear fc(784, 100); fc(x); fc->weight`), never null.
export module infini.nn:module_base;
import infini.std;
export import infini.autograd;
import :state_dict;

export namespace infini::nn {

class Module;
using ModulePtr = std::shared_ptr<Module>;
template <class T>
using Named = std::vector<std::pair<std::string, T>>;

// Run by Module::operator() before forward, with the inputs.
using ForwardPreHook = std::function<void(Module& module, const TensorList& inputs)>;
// Run after forward with the inputs and the output, which the hook may replace.
using ForwardHook = std::function<void(Module& module, const TensorList& inputs, Tensor& output)>;

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module& operator=(const Module&) = delete;

  // "Linear", "Sequential", ...: used in messages and printing.
  const std::string& type_name() const { return type_name_; }
  // Its dotted path below the module label_modules() was called on ("h.3.mlp.c_fc"; "" for
  // that module and for modules never labelled): the precision checker and numerics dumps
  // name modules by it.
  const std::string& label() const { return label_; }
  // Labels this module ("") and every module below it with its name in named_modules().
  void label_modules();

  // The computation of modules that take one tensor. Others (Bilinear, MultiheadAttention,
  // ModuleDict, ...) define their own operator(); this one then raises an Error.
  virtual Tensor forward(const Tensor& input);
  // forward(input) between the forward pre-hooks and hooks.
  Tensor operator()(const Tensor& input);

  // ---- registration (names must be unique among a module's parameters, buffers and
  // children, non-empty and without '.') ----
  // Registers `value` (detached, made a leaf) and returns the registered handle: keep it in a
  // member, e.g. `weight = register_parameter("weight", empty({out, in}));`.
  Tensor register_parameter(const std::string& name, const Tensor& value, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, const Tensor& value);
  template <class Impl>
  std::shared_ptr<Impl> register_module(const std::string& name, std::shared_ptr<Impl> module) {
    add_child(name, module);
    return module;
  }
  template <class Holder>
    requires requires(const Holder& h) { h.ptr(); }
  Holder register_module(const std::string& name, Holder module) {
    add_child(name, module.ptr());
    return module;
  }

  // Removes the child `name` (Error when there is none): the module lives on where else it is
  // held, outside this tree.
  void unregister_module(const std::string& name);

  // ---- the tree (recurse = false: this module's own entries only) ----
  std::vector<Tensor> parameters(bool recurse = true) const;
  Named<Tensor> named_parameters(bool recurse = true) const;  // dotted names: "fc1.weight"
  std::vector<Tensor> buffers(bool recurse = true) const;
  Named<Tensor> named_buffers(bool recurse = true) const;
  std::vector<ModulePtr> children() const;
  const Named<ModulePtr>& named_children() const { return children_; }
  // This module (name "") and all below it, depth first in registration order. Needs the
  // module to be owned by a shared_ptr (as holders and make_shared make it).
  std::vector<ModulePtr> modules();
  Named<ModulePtr> named_modules();

  // ---- modes and conversion ----
  // Sets training mode here and in every descendant (dropout, batch norm read it).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter and buffer (and grad) to `device`, in place: handles stay valid.
  void to(Device device);
  // Converts the floating-point parameters and buffers (and grads) to `dtype`, in place.
  void to(DataType dtype);
  // fn(module) for every descendant (children first), then for this module.
  void apply(const std::function<void(Module&)>& fn);
  // Drops (set_to_none) or zeroes every parameter's grad.
  void zero_grad(bool set_to_none = true);

  // ---- state ----
  // Parameters and buffers by dotted name (tensors share memory with the module's).
  StateDict state_dict() const;
  // Copies values in. strict: every key must match (missing and unexpected keys are listed
  // in the error); always: shapes and dtypes must match (ShapeError / DTypeError naming the key).
  void load_state_dict(const StateDict& state, bool strict = true);
  // A deep copy: same structure, copied parameters and buffers, same modes; no hooks.
  // Modules derived from Cloneable<Derived> and the containers support it; others raise.
  virtual ModulePtr clone() const;

  // ---- hooks; the id removes them again ----
  int register_forward_pre_hook(ForwardPreHook hook);
  int register_forward_hook(ForwardHook hook);
  void remove_hook(int id);

  // PyTorch-style: "Linear(in_features=2, out_features=3, bias=true)", containers nested.
  std::string str() const;

 protected:
  Module(const Module&) = default;  // for Cloneable::clone, which then rebuilds the tree
  // One line describing this module's own options, e.g. "in_features=2, out_features=3".
  virtual std::string extra_repr() const { return {}; }
  // Runs `compute` (the forward of this call) between the hooks, with `inputs` shown to them.
  Tensor call(const TensorList& inputs, const std::function<Tensor()>& compute);
  // Forgets all parameters, buffers and children (Cloneable::clone, before reset()).
  void clear_registrations();
  // Copies parameter and buffer values (with their dtype and device), requires_grad and the
  // training modes from `source`, whose tree must have the same names (deep: no sharing).
  void copy_state_from(const Module& source);

 private:
  void add_child(const std::string& name, ModulePtr child);
  void check_new_name(const std::string& name) const;
  template <class F>
  void for_each_tensor(F&& f);  // f(Tensor&) on every parameter and buffer below here
  void write_str(std::string& out, int indent) const;

  std::string type_name_;
  std::string label_;
  Named<Tensor> parameters_, buffers_;
  Named<ModulePtr> children_;
  bool training_ = true;
  std::vector<std::pair<int, ForwardPreHook>> pre_hooks_;
  std::vector<std::pair<int, ForwardHook>> hooks_;
  int next_hook_id_ = 0;
};

inline std::ostream& operator<<(std::ostream& out, const Module& m) { return out << m.str(); }

// Base of modules that support clone(): Derived builds all its parameters, buffers and
// children in reset() (which its constructor calls), from options it keeps as members.
template <class Derived>
class Cloneable : public Module {
 public:
  using Module::Module;
  // (Re)creates parameters, buffers and children from the options, freshly initialised.
  virtual void reset() = 0;
  ModulePtr clone() const override {
    auto copy = std::make_shared<Derived>(static_cast<const Derived&>(*this));
    copy->clear_registrations();
    copy->reset();
    copy->copy_state_from(*this);
    return copy;
  }
};

// The handle users hold: shared ownership of one Impl, never null. Constructing it
// constructs the Impl (`Linear fc(784, 100)`); copies share it. `->` reaches the Impl.
template <class Impl>
class ModuleHolder {
 public:
  template <class... Args>
    requires std::constructible_from<Impl, Args...>
  ModuleHolder(Args&&... args) : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {}
  // Wraps an existing module; Error if null.
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {
    if (!impl_) throw Error("ModuleHolder", "cannot hold a null module");
  }
  Impl* operator->() const { return impl_.get(); }
  Impl& operator*() const { return *impl_; }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    return (*impl_)(std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

template <class Impl>
std::ostream& operator<<(std::ostream& out, const ModuleHolder<Impl>& m) {
  return out << *m;
}

}  // namespace infini::nn
