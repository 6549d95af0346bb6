// TrainingPlan's distributed-checkpoint state: this rank's model and optimizer state as
// pieces of the whole model's tensors, and loading them back under any layout.
module;
#include <cstddef>
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {

namespace {

// Rank `r` could not read its part: what the other ranks raise.
Error read_failed(int r, const DistributedCheckpoint& checkpoint) {
  return Error("TrainingPlan.load_sharded_state",
               concat("rank ", r, " could not read its part of '", checkpoint.dir().string(),
                      "' (its error says why); nothing was loaded"));
}

// "state.<i>.<field>" -> i and field.
bool split_state_key(const std::string& key, std::size_t& index, std::string& field) {
  if (!key.starts_with("state.")) return false;
  const std::size_t dot = key.find('.', 6);
  if (dot == std::string::npos) return false;
  index = std::stoul(key.substr(6, dot - 6));
  field = key.substr(dot + 1);
  return true;
}

}  // namespace

std::vector<ShardedTensor> TrainingPlan::model_state(const std::vector<OptimizedPiece>& pieces) const {
  std::vector<ShardedTensor> state;
  if (units()) {  // ZeRO-3: the parameters' values live in this rank's pieces
    for (const OptimizedPiece& piece : pieces) {
      ShardedTensor s = piece.layout;
      s.key = "model/" + piece.name;
      s.local = s.local.detach();
      state.push_back(std::move(s));
    }
  } else {
    for (auto& [name, p] : model_.module->named_parameters())
      state.push_back(tensor_parallel_shard("model/" + name, p.detach(), tp_ ? tp_->shard_spec(p) : nn::ShardSpec{},
                                            groups_.coord.tp, layout_.tp()));
  }
  for (auto& [name, b] : model_.module->named_buffers()) state.push_back(replicated("model/" + name, b.detach()));
  return state;
}

std::vector<ShardedTensor> TrainingPlan::sharded_state(const std::vector<ReplicatedState>& extra) const {
  NoGradGuard no_grad;
  const std::vector<OptimizedPiece> pieces = optimized_pieces();
  std::vector<ShardedTensor> state = model_state(pieces);
  for (const auto& [key, value] : optimizer_->state_dict()) {
    std::size_t index = 0;
    std::string field;
    if (key.starts_with("param_groups.")) {
      if (!key.ends_with(".params")) state.push_back(replicated("optimizer/" + key, value));
    } else if (split_state_key(key, index, field)) {
      const OptimizedPiece& piece = pieces.at(index);
      const std::string name = concat("optimizer/", piece.name, "/", field);
      if (value.dim() == 0 && piece.layout.local.dim() != 0) {
        state.push_back(replicated(name, value));  // a count (step)
      } else {
        ShardedTensor s = piece.layout;
        s.key = name;
        s.local = value;
        state.push_back(std::move(s));
      }
    }
  }
  if (scaler_.is_enabled())
    for (auto& [key, value] : scaler_.state_dict()) state.push_back(replicated("grad_scaler/" + key, value));
  for (const ReplicatedState& part : extra)
    for (auto& [key, value] : part.save()) state.push_back(replicated(part.name + "/" + key, value));
  return state;
}

void TrainingPlan::load_sharded_state(const DistributedCheckpoint& checkpoint, const std::vector<ReplicatedState>& extra) {
  NoGradGuard no_grad;
  // The targets: the model's, the optimizer state the checkpoint has for each optimized
  // tensor, the optimizer's options and the replicated parts.
  const std::vector<OptimizedPiece> pieces = optimized_pieces();
  std::vector<ShardedTensor> targets = model_state(pieces);
  const std::size_t model_count = targets.size();
  std::vector<std::string> optimizer_keys;  // the optimizer's state-dict key of each target after the model's
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const std::string prefix = concat("optimizer/", pieces[i].name, "/");
    for (auto it = checkpoint.tensors().lower_bound(prefix);
         it != checkpoint.tensors().end() && it->first.starts_with(prefix); ++it) {
      const std::string field = it->first.substr(prefix.size());
      if (it->second.shape.empty() && pieces[i].layout.local.dim() != 0) {
        targets.push_back(replicated(it->first, empty({}, TensorOptions{.dtype = it->second.dtype})));
      } else {
        ShardedTensor s = pieces[i].layout;
        s.key = it->first;
        s.local = empty(s.local.shape(), TensorOptions{.dtype = it->second.dtype});
        targets.push_back(std::move(s));
      }
      optimizer_keys.push_back(concat("state.", i, ".", field));
    }
  }
  std::vector<ReplicatedState> parts = extra;
  if (scaler_.is_enabled())
    parts.push_back({"grad_scaler", {}, [this](const StateDict& state) { scaler_.load_state_dict(state); }});
  parts.insert(parts.begin(), ReplicatedState{"optimizer", {}, {}});  // its options: param_groups.<g>.<option>
  std::vector<std::vector<std::string>> part_keys(parts.size());
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const std::string prefix = parts[k].name + "/";
    for (auto it = checkpoint.tensors().lower_bound(prefix);
         it != checkpoint.tensors().end() && it->first.starts_with(prefix); ++it) {
      const std::string key = it->first.substr(prefix.size());
      if (k == 0 && !key.starts_with("param_groups.")) continue;
      targets.push_back(replicated(it->first, empty(it->second.shape, TensorOptions{.dtype = it->second.dtype})));
      part_keys[k].push_back(key);
    }
  }
  // Read everything on every rank, then load only if every rank could.
  std::vector<Tensor> values;
  std::exception_ptr failure;
  try {
    values = checkpoint.read(targets);
  } catch (...) {
    failure = std::current_exception();
  }
  const int world = groups_.world ? groups_.world->size() : 1;
  Tensor ok = zeros({world}, TensorOptions{.dtype = kInt64});
  ok.data_ptr<std::int64_t>()[groups_.world ? groups_.world->rank() : 0] = failure ? 0 : 1;
  if (groups_.world) groups_.world->all_reduce(ok).wait();
  if (failure) std::rethrow_exception(failure);
  for (int r = 0; r < world; ++r)
    if (ok.data_ptr<std::int64_t>()[r] == 0) throw read_failed(r, checkpoint);

  StateDict optimizer;
  std::size_t at = model_count;
  for (const std::string& key : optimizer_keys) optimizer[key] = values[at++];
  std::vector<StateDict> part_states(parts.size());
  for (std::size_t k = 0; k < parts.size(); ++k)
    for (const std::string& key : part_keys[k]) part_states[k][key] = values[at++];
  // The parameter numbers of each group, as this rank's optimizer has them.
  std::int64_t next = 0;
  for (std::size_t g = 0; g < optimizer_->num_param_groups(); ++g) {
    std::vector<std::int64_t> numbers;
    for (std::size_t i = 0; i < optimizer_->params(g).size(); ++i) numbers.push_back(next++);
    optimizer[concat("param_groups.", g, ".params")] =
        from_vector(numbers, {static_cast<std::int64_t>(numbers.size())}, {.dtype = kInt64});
  }
  for (const auto& [key, value] : part_states[0]) optimizer[key] = value;
  for (std::size_t i = 0; i < model_count; ++i) Tensor(targets[i].local).copy_(values[i]);  // parameters or pieces
  optimizer_->load_state_dict(optimizer);
  for (std::size_t k = 1; k < parts.size(); ++k) parts[k].load(part_states[k]);
  if (pipeline_) pipeline_->share_tied_parameters();  // the last stage's copies, from the first
}

std::vector<TrainingPlan::OptimizedPiece> TrainingPlan::optimized_pieces() const {
  std::vector<std::pair<std::string, ShardedTensor>> params;  // every parameter's whole-model layout
  for (auto& [name, p] : model_.module->named_parameters())
    params.emplace_back(name, tensor_parallel_shard(name, p, tp_ ? tp_->shard_spec(p) : nn::ShardSpec{},
                                                    groups_.coord.tp, layout_.tp()));
  // In the optimizer's numbering (its groups may order the tensors otherwise).
  const std::vector<OptimizedTensor> optimized = optimized_tensors();
  std::vector<OptimizedPiece> pieces;
  for (const Tensor& tensor : optimizer_->all_params()) {
    const auto t = std::find_if(optimized.begin(), optimized.end(),
                                [&](const OptimizedTensor& o) { return o.tensor.is_same(tensor); });
    const auto found = t == optimized.end() ? params.end()
                                            : std::find_if(params.begin(), params.end(), [&](const auto& entry) {
                                                return entry.second.local.is_same(t->parameter);
                                              });
    if (found == params.end())
      throw Error("TrainingPlan.sharded_state", "the optimizer updates a tensor that is no parameter's (or piece's)");
    if (t->tensor.is_same(t->parameter)) {
      pieces.push_back({found->first, found->second});
      continue;
    }
    const std::int64_t begin = t->offset;  // a ZeRO piece
    pieces.push_back({found->first, flat_piece(found->second, found->first, t->tensor, begin, begin + t->tensor.numel())});
  }
  return pieces;
}

}  // namespace infini::parallel
