// ParameterUnits (see parameter_units.cppm).
module;
#include <cstddef>
module infini.parallel;
import infini.std;

namespace infini::parallel {

UnitAssignment assign_units(const std::vector<Tensor>& params, const std::vector<std::shared_ptr<nn::Module>>& blocks) {
  const int rest = static_cast<int>(blocks.size());
  UnitAssignment a{.unit_of = std::vector<int>(params.size(), rest), .group_of = {}, .units = rest + 1};
  for (std::size_t b = 0; b < blocks.size(); ++b)
    for (const Tensor& p : blocks[b]->parameters())
      for (std::size_t i = 0; i < params.size(); ++i)
        if (params[i].is_same(p)) a.unit_of[i] = static_cast<int>(b);
  a.group_of = a.unit_of;
  int next_group = rest;
  for (std::size_t i = 0; i < params.size(); ++i)
    if (a.unit_of[i] == rest) a.group_of[i] = next_group++;
  return a;
}

std::vector<DataType> gather_dtypes(nn::Module& model, const std::vector<Tensor>& params,
                                    std::optional<DataType> autocast) {
  std::vector<DataType> dtypes;
  for (const Tensor& p : params) dtypes.push_back(p.dtype());
  if (!autocast) return dtypes;
  std::vector<Tensor> linear, other;  // the parameters each kind of module holds itself
  for (const auto& module : model.modules()) {
    const bool is_linear = dynamic_cast<const nn::LinearImpl*>(module.get()) != nullptr;
    // A row-parallel layer adds its bias after the all-reduce, outside the product.
    const auto* row = dynamic_cast<const RowParallelLinearImpl*>(module.get());
    for (const Tensor& p : module->parameters(/*recurse=*/false))
      (is_linear && !(row && p.is_same(row->bias)) ? linear : other).push_back(p);
  }
  const auto holds = [](const std::vector<Tensor>& list, const Tensor& p) {
    return std::ranges::any_of(list, [&](const Tensor& q) { return q.is_same(p); });
  };
  for (std::size_t i = 0; i < params.size(); ++i)
    if (params[i].dtype() == kFloat32 && holds(linear, params[i]) && !holds(other, params[i])) dtypes[i] = *autocast;
  return dtypes;
}

ParameterUnits::ParameterUnits(Reducer& reducer, const UnitAssignment& assignment)
    : reducer_(&reducer), buckets_(static_cast<std::size_t>(assignment.units)) {
  const auto buckets = reducer.buckets();
  for (std::size_t k = 0; k < buckets.size(); ++k)
    buckets_.at(static_cast<std::size_t>(assignment.unit_of.at(buckets[k].front()))).push_back(k);
}

void ParameterUnits::prefetch(std::size_t unit, bool full_precision) const {
  if (unit < buckets_.size())
    for (const std::size_t k : buckets_[unit]) reducer_->gather_bucket(k, full_precision);
}

void ParameterUnits::gather(std::size_t unit, bool full_precision) const {
  std::vector<Work> works;
  for (const std::size_t k : buckets_.at(unit)) works.push_back(reducer_->gather_bucket(k, full_precision));
  when_all(works).wait();
}

void ParameterUnits::release(std::size_t unit) const {
  if (holds_ > 0) return;
  for (const std::size_t k : buckets_.at(unit)) reducer_->release_bucket(k);
}

void ParameterUnits::release_all() const {
  for (std::size_t u = 0; u < buckets_.size(); ++u) release(u);
}

void ParameterUnits::hold_all() {
  for (std::size_t u = 0; u < buckets_.size(); ++u) prefetch(u, /*full_precision=*/true);
  for (std::size_t u = 0; u < buckets_.size(); ++u) gather(u, /*full_precision=*/true);
  ++holds_;
}

void ParameterUnits::drop_hold() {
  if (holds_ > 0 && --holds_ == 0) release_all();
}

Tensor ParameterUnits::run_block(std::size_t unit, const std::shared_ptr<nn::Module>& block, const Tensor& x,
                                 bool checkpoint, std::optional<std::size_t> next,
                                 std::optional<std::size_t> previous) const {
  // The gradient of the block's output arriving means its backward comes next (gather it,
  // launch the previous one's); the gradient of its input, that its backward is done. An input
  // that needs no gradient (frozen layers below, as under LoRA) gives no such signal: the unit
  // then stays gathered until the pass's release_all.
  if (GradMode::is_enabled() && x.requires_grad()) x.register_hook([this, unit](const Tensor& grad) {
    release(unit);
    return grad;
  });
  gather(unit);
  if (next) prefetch(*next);
  Tensor y = parallel::run_block(block, x, checkpoint);
  release(unit);
  if (GradMode::is_enabled() && y.requires_grad()) y.register_hook([this, unit, previous](const Tensor& grad) {
    gather(unit);
    if (previous) prefetch(*previous);
    return grad;
  });
  return y;
}

}  // namespace infini::parallel
