// Optimizer's parameter bookkeeping and its state dict layout (see optimizer.cppm).
module;
#include <cstddef>
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::optim {
namespace {

// Splits "<head>.<n>.<field>" into n and field; false when the key does not have that form
// (n decimal without leading zeros, field non-empty).
bool split_indexed_key(std::string_view key, std::string_view head, std::uint64_t& n, std::string& field) {
  if (!key.starts_with(head) || key.size() <= head.size() || key[head.size()] != '.') return false;
  const std::string_view rest = key.substr(head.size() + 1);
  const std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == rest.size()) return false;
  const std::string_view digits = rest.substr(0, dot);
  if (digits.size() > 1 && digits[0] == '0') return false;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size()) return false;
  field = std::string(rest.substr(dot + 1));
  return true;
}

bool has_internal_overlap(const Tensor& t) {
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0 && t.size(d) > 1) return true;
  return false;
}

}  // namespace

Optimizer::~Optimizer() = default;

void Optimizer::scaled_step(double grad_scale) {
  if (grad_scale != 1.0) {
    NoGradGuard no_grad;
    for_each_grad([&](std::size_t, std::size_t, const Tensor&, Tensor grad) { mul_(grad, grad_scale); });
  }
  step();
}

void Optimizer::check_grad_scale(const Tensor& grad_scale, Device device) const {
  const std::string op = name_ + ".scaled_step";
  if (!grad_scale.defined()) throw Error(op, "grad_scale is an undefined tensor");
  if (grad_scale.numel() != 1 || grad_scale.dtype() != kFloat64)
    throw Error(op, concat("grad_scale is ", grad_scale.dtype(), grad_scale.shape(), ", expected one float64 element"));
  if (grad_scale.device() != device)
    throw DeviceError(op, concat("grad_scale is on ", grad_scale.device(), ", expected the parameters' device ", device));
}

void Optimizer::refuse_capture(std::string_view method, std::string_view hint) const {
  if (is_capturing_cuda_graph())
    throw Error(concat(name_, ".", method), concat("not capturable: a CUDA graph would replay its update with this "
                                                   "step's learning rate and step counts; ", hint));
}

void Optimizer::scaled_step(const Tensor& grad_scale) {
  refuse_capture("scaled_step", "step it outside the capture");
  check_grad_scale(grad_scale, grad_scale.device());
  scaled_step(grad_scale.item<double>());
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const std::vector<Tensor>& group : groups_)
    for (const Tensor& param : group) {
      if (!param.grad().defined()) continue;
      if (set_to_none) {
        param.set_grad(Tensor());
      } else {
        Tensor grad = param.grad().detach();  // a grad made with create_graph loses its history
        grad.zero_();
        param.set_grad(grad);
      }
    }
}

void Optimizer::check_group(std::string_view method, std::size_t group) const {
  if (group >= groups_.size())
    throw IndexError(concat(name_, ".", method), concat("param group ", group, " is out of range (the optimizer has ", groups_.size(),
                                " groups)"));
}

double Optimizer::lr(std::size_t group) const {
  check_group("lr", group);
  return group_lr(group);
}

void Optimizer::set_lr(std::size_t group, double lr) {
  check_group("set_lr", group);
  set_group_lr(group, lr);
}

const std::vector<Tensor>& Optimizer::params(std::size_t group) const {
  check_group("params", group);
  return groups_[group];
}

std::vector<Tensor> Optimizer::all_params() const {
  std::vector<Tensor> out;
  for (const std::vector<Tensor>& group : groups_) out.insert(out.end(), group.begin(), group.end());
  return out;
}

std::size_t Optimizer::num_params() const noexcept {
  std::size_t n = 0;
  for (const std::vector<Tensor>& group : groups_) n += group.size();
  return n;
}

void Optimizer::add_group_params(std::vector<Tensor> params) {
  const std::size_t g = groups_.size();
  for (std::size_t j = 0; j < params.size(); ++j) {
    const Tensor& p = params[j];
    const std::string which = concat("parameter ", j, " of group ", g);
    if (!p.defined()) throw Error(name_, concat(which, " is an undefined tensor"));
    if (!is_floating_point(p.dtype()))
      throw DTypeError(name_, concat(which, " has dtype ", p.dtype(), "; only floating-point tensors can be optimized"));
    if (!p.is_leaf()) throw Error(name_, concat(which, " is not a leaf tensor (it has a grad_fn); can't optimize it"));
    if (has_internal_overlap(p))
      throw Error(name_, concat(which, " of shape ", p.shape(), " and strides ", p.strides(),
                                " has several elements at one address"));
    for (std::size_t k = 0; k < j; ++k)
      if (params[k].is_same(p)) throw Error(name_, concat(which, " appears twice in the group (also as parameter ", k, ")"));
    for (std::size_t h = 0; h < groups_.size(); ++h)
      for (const Tensor& other : groups_[h])
        if (other.is_same(p)) throw Error(name_, concat(which, " is already in param group ", h));
  }
  groups_.push_back(std::move(params));
}

void Optimizer::check_grad(std::size_t index, const Tensor& param, const Tensor& grad) const {
  const std::string op = name_ + ".step";
  if (grad.shape() != param.shape())
    throw ShapeError(op, concat("parameter ", index, " has shape ", param.shape(), " but its grad has shape ",
                                grad.shape()));
  if (grad.dtype() != param.dtype())
    throw DTypeError(op, concat("parameter ", index, " is ", param.dtype(), " but its grad is ", grad.dtype()));
  if (grad.device() != param.device())
    throw DeviceError(op, concat("parameter ", index, " is on ", param.device(), " but its grad is on ",
                                 grad.device()));
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  std::int64_t index = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    StateWriter group(out, concat("param_groups.", g, "."));
    std::vector<std::int64_t> ids;
    for (std::size_t j = 0; j < groups_[g].size(); ++j) {
      StateWriter state(out, concat("state.", index, "."));
      write_param_state(static_cast<std::size_t>(index), state);
      ids.push_back(index++);
    }
    group.integers("params", ids);
    write_group(g, group);
  }
  return out;
}

void Optimizer::load_state_dict(const StateDict& dict) {
  const std::string op = name_ + ".load_state_dict";
  // Sort the entries into groups and per-parameter states by their numbers.
  std::map<std::uint64_t, StateReader> groups, states;
  for (const auto& [key, value] : dict) {
    std::uint64_t n = 0;
    std::string field;
    if (split_indexed_key(key, "param_groups", n, field)) {
      groups.try_emplace(n, op, concat("param_groups.", n, ".")).first->second.add(field, value);
    } else if (split_indexed_key(key, "state", n, field)) {
      states.try_emplace(n, op, concat("state.", n, ".")).first->second.add(field, value);
    } else {
      throw Error(op, concat("unexpected key \"", key, "\" (expected \"param_groups.<g>.<option>\" or ",
                             "\"state.<i>.<name>\")"));
    }
  }
  const std::size_t expected_groups = groups_.size();
  if (groups.size() != expected_groups || (!groups.empty() && groups.rbegin()->first + 1 != expected_groups))
    throw Error(op, concat("the state dict has ", groups.size(), " parameter groups (numbered up to ",
                           groups.empty() ? 0 : groups.rbegin()->first, "), the optimizer has ", expected_groups));

  // Saved parameter numbers map, in order, to this optimizer's parameters (PyTorch's rule).
  std::map<std::int64_t, std::size_t> index_of;
  std::vector<StateReader> group_readers;
  std::size_t index = 0;
  for (auto& [g, reader] : groups) {
    const std::vector<std::int64_t> ids = reader.integers("params");
    if (ids.size() != groups_[g].size())
      throw Error(op, concat("param group ", g, " of the state dict has ", ids.size(), " parameters, the optimizer's has ",
                             groups_[g].size()));
    for (std::int64_t id : ids)
      if (!index_of.emplace(id, index++).second)
        throw Error(op, concat("parameter number ", id, " appears twice in the state dict's param groups"));
    group_readers.push_back(std::move(reader));
  }
  std::vector<std::optional<StateReader>> state_readers(num_params());
  for (auto& [id, reader] : states) {
    const auto it = id <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ? index_of.find(static_cast<std::int64_t>(id))
                                                                 : index_of.end();
    if (it == index_of.end())
      throw Error(op, concat("state.", id, " belongs to no parameter listed in the state dict's param groups"));
    state_readers[it->second] = std::move(reader);
  }
  read_all(group_readers, state_readers);
}

}  // namespace infini::optim
