// Module's tree walks, conversion, state and hooks (see module_base.cppm).
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

std::string join(const std::string& prefix, const std::string& name) {
  if (prefix.empty()) return name;
  return name.empty() ? prefix : prefix + "." + name;
}

// All (dotted name, tensor) pairs of `own` entries of `module` and, with recurse, its
// descendants', depth first.
void collect(const Module& module, const std::string& prefix, bool recurse,
             const std::function<const Named<Tensor>&(const Module&)>& own, Named<Tensor>& out) {
  for (const auto& [name, t] : own(module)) out.emplace_back(join(prefix, name), t);
  if (!recurse) return;
  for (const auto& [name, child] : module.named_children()) collect(*child, join(prefix, name), true, own, out);
}

std::string key_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

}  // namespace

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Tensor Module::forward(const Tensor&) {
  throw Error(type_name_ + ".forward", concat(type_name_, " does not take a single tensor; call it with its own arguments"));
}

Tensor Module::operator()(const Tensor& input) {
  return call({input}, [&] { return forward(input); });
}

Tensor Module::call(const TensorList& inputs, const std::function<Tensor()>& compute) {
  for (const auto& [id, hook] : pre_hooks_) hook(*this, inputs);
  const trace::Span span(type_name_, "module");
  std::optional<numerics::ModuleScope> scope;  // ops inside name this module (numerics.cppm)
  if (numerics::checking() || numerics::dumping()) scope.emplace(label_, type_name_);
  Tensor output = compute();
  if (numerics::dumping()) numerics::record_module_output(label_, type_name_, output);
  for (const auto& [id, hook] : hooks_) hook(*this, inputs, output);
  return output;
}

void Module::label_modules() {
  for (auto& [name, module] : named_modules()) module->label_ = name;
}

// ---- registration ----

void Module::check_new_name(const std::string& name) const {
  const std::string op = type_name_ + ".register";
  if (name.empty() || name.find('.') != std::string::npos)
    throw Error(op, concat("name \"", name, "\" must be non-empty and contain no '.'"));
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& entry) { return entry.first == name; });
  };
  if (taken(parameters_) || taken(buffers_) || taken(children_))
    throw Error(op, concat("\"", name, "\" is already registered in this ", type_name_));
}

Tensor Module::register_parameter(const std::string& name, const Tensor& value, bool requires_grad) {
  check_new_name(name);
  if (!value.defined()) throw Error(type_name_ + ".register_parameter", concat("parameter \"", name, "\" is undefined"));
  Tensor param = value.detach();
  if (requires_grad) param.requires_grad_();
  parameters_.emplace_back(name, param);
  return param;
}

Tensor Module::register_buffer(const std::string& name, const Tensor& value) {
  check_new_name(name);
  if (!value.defined()) throw Error(type_name_ + ".register_buffer", concat("buffer \"", name, "\" is undefined"));
  buffers_.emplace_back(name, value.detach());
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, ModulePtr child) {
  check_new_name(name);
  if (!child) throw Error(type_name_ + ".register_module", concat("module \"", name, "\" is null"));
  children_.emplace_back(name, std::move(child));
}

void Module::unregister_module(const std::string& name) {
  if (std::erase_if(children_, [&](const auto& child) { return child.first == name; }) == 0)
    throw Error(type_name_ + ".unregister_module", concat("no child module \"", name, "\""));
}

void Module::clear_registrations() {
  parameters_.clear();
  buffers_.clear();
  children_.clear();
}

// ---- the tree ----

Named<Tensor> Module::named_parameters(bool recurse) const {
  Named<Tensor> out;
  collect(*this, "", recurse, [](const Module& m) -> const Named<Tensor>& { return m.parameters_; }, out);
  return out;
}

Named<Tensor> Module::named_buffers(bool recurse) const {
  Named<Tensor> out;
  collect(*this, "", recurse, [](const Module& m) -> const Named<Tensor>& { return m.buffers_; }, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<ModulePtr> Module::children() const {
  std::vector<ModulePtr> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

Named<ModulePtr> Module::named_modules() {
  ModulePtr self = weak_from_this().lock();
  if (!self)
    throw Error(type_name_ + ".modules", "the module must be owned by a shared_ptr (create it through its holder or make_shared)");
  Named<ModulePtr> out{{"", self}};
  for (const auto& [name, child] : children_)
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(join(name, sub), m);
  return out;
}

std::vector<ModulePtr> Module::modules() {
  std::vector<ModulePtr> out;
  for (auto& [name, m] : named_modules()) out.push_back(m);
  return out;
}

// ---- modes and conversion ----

void Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (const auto& [name, child] : children_) child->apply(fn);
  fn(*this);
}

template <class F>
void Module::for_each_tensor(F&& f) {
  for (auto& [name, t] : parameters_) f(t);
  for (auto& [name, t] : buffers_) f(t);
  for (const auto& [name, child] : children_) child->for_each_tensor(f);
}

namespace {

// Replaces t's data (and grad) by convert(data), keeping every handle to t valid.
void convert_in_place(const Tensor& t, const std::function<Tensor(const Tensor&)>& convert) {
  NoGradGuard no_grad;
  const Tensor grad = t.grad().defined() ? convert(t.grad()) : Tensor();
  t.set_data(convert(t.detach()));
  if (grad.defined()) t.set_grad(grad);
}

}  // namespace

void Module::to(Device device) {
  for_each_tensor([&](Tensor& t) { convert_in_place(t, [&](const Tensor& x) { return x.to(device); }); });
}

void Module::to(DataType dtype) {
  if (!is_floating_point(dtype))
    throw DTypeError(type_name_ + ".to", concat("modules convert to floating-point dtypes, got ", dtype));
  for_each_tensor([&](Tensor& t) {
    if (is_floating_point(t.dtype())) convert_in_place(t, [&](const Tensor& x) { return x.to(dtype); });
  });
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) p.set_grad(Tensor());
    else p.grad().detach().zero_();
  }
}

// ---- state ----

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, t] : named_parameters()) out.emplace(name, t.detach());
  for (auto& [name, t] : named_buffers()) out.emplace(name, t.detach());
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  const std::string op = type_name_ + ".load_state_dict";
  Named<Tensor> own = named_parameters();
  for (auto& entry : named_buffers()) own.push_back(entry);
  std::vector<std::string> missing, unexpected;
  std::set<std::string> known;
  for (const auto& [name, t] : own) {
    known.insert(name);
    const auto it = state.find(name);
    if (it == state.end()) {
      missing.push_back(name);
      continue;
    }
    const Tensor& value = it->second;
    if (!value.defined()) throw Error(op, concat("\"", name, "\" is an undefined tensor"));
    if (value.shape() != t.shape())
      throw ShapeError(op, concat("\"", name, "\" has shape ", value.shape(), " in the state dict, the module expects ", t.shape()));
    if (value.dtype() != t.dtype())
      throw DTypeError(op, concat("\"", name, "\" is ", value.dtype(), " in the state dict, the module holds ", t.dtype()));
  }
  for (const auto& [name, value] : state)
    if (!known.contains(name)) unexpected.push_back(name);
  if (strict && (!missing.empty() || !unexpected.empty()))
    throw Error(op, concat("state dict does not match ", type_name_, ": missing keys [", key_list(missing),
                           "], unexpected keys [", key_list(unexpected), "]"));
  NoGradGuard no_grad;
  for (auto& [name, t] : own) {
    const auto it = state.find(name);
    if (it != state.end()) t.detach().copy_(it->second);
  }
}

ModulePtr Module::clone() const {
  throw Error(type_name_ + ".clone", concat(type_name_, " cannot be cloned: derive it from Cloneable<", type_name_,
                                            "> and build its members in reset()"));
}

void Module::copy_state_from(const Module& source) {
  const std::string op = type_name_ + ".clone";
  const auto copy_list = [&](Named<Tensor>& to, const Named<Tensor>& from) {
    if (to.size() != from.size()) throw Error(op, "reset() built a different set of tensors than the original has");
    for (std::size_t i = 0; i < to.size(); ++i) {
      if (to[i].first != from[i].first)
        throw Error(op, concat("reset() built \"", to[i].first, "\" where the original has \"", from[i].first, "\""));
      const Tensor& src = from[i].second;
      Tensor& dst = to[i].second;
      convert_in_place(dst, [&](const Tensor&) { return src.detach().clone(); });
      if (dst.requires_grad() != src.requires_grad()) dst.requires_grad_(src.requires_grad());
      if (src.grad().defined()) dst.set_grad(src.grad().detach().clone());
    }
  };
  copy_list(parameters_, source.parameters_);
  copy_list(buffers_, source.buffers_);
  training_ = source.training_;
  if (children_.size() != source.children_.size()) throw Error(op, "reset() built a different set of children");
  for (std::size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].first != source.children_[i].first)
      throw Error(op, concat("reset() built child \"", children_[i].first, "\" where the original has \"",
                             source.children_[i].first, "\""));
    children_[i].second->copy_state_from(*source.children_[i].second);
  }
}

// ---- hooks ----

int Module::register_forward_pre_hook(ForwardPreHook hook) {
  pre_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

int Module::register_forward_hook(ForwardHook hook) {
  hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void Module::remove_hook(int id) {
  std::erase_if(pre_hooks_, [&](const auto& h) { return h.first == id; });
  std::erase_if(hooks_, [&](const auto& h) { return h.first == id; });
}

// ---- printing ----

void Module::write_str(std::string& out, int indent) const {
  out += type_name_ + "(" + extra_repr();
  if (children_.empty()) {
    out += ")";
    return;
  }
  out += "\n";
  for (const auto& [name, child] : children_) {
    out += std::string(indent + 2, ' ') + "(" + name + "): ";
    child->write_str(out, indent + 2);
    out += "\n";
  }
  out += std::string(indent, ' ') + ")";
}

std::string Module::str() const {
  std::string out;
  write_str(out, 0);
  return out;
}

}  // namespace infini::nn
