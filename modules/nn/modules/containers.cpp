// Sequential, ModuleList, ModuleDict and Residual (see containers.cppm).
module;
#include <cstddef>
module infini.nn;
import infini.std;

namespace infini::nn {
namespace {

const ModulePtr& child_at(const Module& m, std::size_t i) {
  const auto& children = m.named_children();
  if (i >= children.size())
    throw IndexError(m.type_name() + "[]", concat("index ", i, " is out of range for ", children.size(), " modules"));
  return children[i].second;
}

}  // namespace

void SequentialImpl::push_back(ModulePtr module) { register_module(std::to_string(size()), std::move(module)); }

const ModulePtr& SequentialImpl::operator[](std::size_t i) const { return child_at(*this, i); }

Tensor SequentialImpl::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& [name, child] : named_children()) y = (*child)(y);
  return y;
}

ModulePtr SequentialImpl::clone() const {
  auto copy = std::make_shared<SequentialImpl>();
  for (const auto& [name, child] : named_children()) copy->push_back(child->clone());
  copy->train(is_training());
  return copy;
}

void ModuleListImpl::push_back(ModulePtr module) { register_module(std::to_string(size()), std::move(module)); }

const ModulePtr& ModuleListImpl::operator[](std::size_t i) const { return child_at(*this, i); }

ModulePtr ModuleListImpl::clone() const {
  auto copy = std::make_shared<ModuleListImpl>();
  for (const auto& [name, child] : named_children()) copy->push_back(child->clone());
  copy->train(is_training());
  return copy;
}

void ModuleDictImpl::insert(const std::string& key, ModulePtr module) { register_module(key, std::move(module)); }

bool ModuleDictImpl::contains(const std::string& key) const {
  for (const auto& [name, child] : named_children())
    if (name == key) return true;
  return false;
}

const ModulePtr& ModuleDictImpl::at(const std::string& key) const {
  for (const auto& [name, child] : named_children())
    if (name == key) return child;
  std::string known;
  for (const auto& k : keys()) known += (known.empty() ? "" : ", ") + k;
  throw IndexError("ModuleDict.at", concat("no module \"", key, "\"; keys: [", known, "]"));
}

std::vector<std::string> ModuleDictImpl::keys() const {
  std::vector<std::string> out;
  for (const auto& [name, child] : named_children()) out.push_back(name);
  return out;
}

Tensor ModuleDictImpl::operator()(const std::string& key, const Tensor& x) {
  const ModulePtr& module = at(key);
  return call({x}, [&] { return (*module)(x); });
}

ModulePtr ModuleDictImpl::clone() const {
  auto copy = std::make_shared<ModuleDictImpl>();
  for (const auto& [name, child] : named_children()) copy->insert(name, child->clone());
  copy->train(is_training());
  return copy;
}

Tensor ResidualImpl::forward(const Tensor& x) { return add(x, (*block_)(x)); }

ModulePtr ResidualImpl::clone() const {
  auto copy = std::make_shared<ResidualImpl>(block_->clone());
  copy->train(is_training());
  return copy;
}

}  // namespace infini::nn
