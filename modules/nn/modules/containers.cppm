// Containers: Sequential (chains one-tensor modules), ModuleList (an indexable list),
// ModuleDict (modules by key; forward routed by key) and Residual (x + f(x)). They hold
// any modules, so they clone by cloning each child.
export module infini.nn:containers;
import infini.std;
import :module_base;

export namespace infini::nn {

// Anything that converts to a ModulePtr: a holder, a shared_ptr to a module.
template <class M>
ModulePtr as_module(const ModuleHolder<M>& m) {
  return m.ptr();
}
template <class M>
ModulePtr as_module(const std::shared_ptr<M>& m) {
  return m;
}

class SequentialImpl : public Module {
 public:
  SequentialImpl() : Module("Sequential") {}
  template <class... M>
  explicit SequentialImpl(const M&... modules) : Module("Sequential") {
    (push_back(as_module(modules)), ...);
  }
  // Appends under the name "0", "1", ...
  void push_back(ModulePtr module);
  std::size_t size() const { return named_children().size(); }
  const ModulePtr& operator[](std::size_t i) const;
  // x through every module in order.
  Tensor forward(const Tensor& x) override;
  ModulePtr clone() const override;
};
using Sequential = ModuleHolder<SequentialImpl>;

class ModuleListImpl : public Module {
 public:
  ModuleListImpl() : Module("ModuleList") {}
  template <class... M>
  explicit ModuleListImpl(const M&... modules) : Module("ModuleList") {
    (push_back(as_module(modules)), ...);
  }
  void push_back(ModulePtr module);
  std::size_t size() const { return named_children().size(); }
  const ModulePtr& operator[](std::size_t i) const;
  // The i-th module as its concrete type; Error if it is another type.
  template <class Impl>
  std::shared_ptr<Impl> at(std::size_t i) const {
    auto m = std::dynamic_pointer_cast<Impl>((*this)[i]);
    if (!m) throw Error("ModuleList.at", concat("module ", i, " is a ", (*this)[i]->type_name(), ", not the type asked for"));
    return m;
  }
  ModulePtr clone() const override;
};
using ModuleList = ModuleHolder<ModuleListImpl>;

class ModuleDictImpl : public Module {
 public:
  ModuleDictImpl() : Module("ModuleDict") {}
  // Keys in insertion order; each must be a valid, new module name.
  void insert(const std::string& key, ModulePtr module);
  bool contains(const std::string& key) const;
  const ModulePtr& at(const std::string& key) const;  // IndexError naming the known keys
  std::vector<std::string> keys() const;
  std::size_t size() const { return named_children().size(); }
  // module `key` applied to x (through its hooks), within this module's hooks.
  Tensor operator()(const std::string& key, const Tensor& x);
  ModulePtr clone() const override;
};
using ModuleDict = ModuleHolder<ModuleDictImpl>;

// x + block(x): the skip connection of residual networks.
class ResidualImpl : public Module {
 public:
  template <class M>
  explicit ResidualImpl(const M& block) : Module("Residual"), block_(register_module("block", as_module(block))) {}
  Tensor forward(const Tensor& x) override;
  ModulePtr clone() const override;

 private:
  ModulePtr block_;
};
using Residual = ModuleHolder<ResidualImpl>;

}  // namespace infini::nn
