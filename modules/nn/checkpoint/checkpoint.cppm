// Training checkpoints: everything a run needs to go on bit for bit (model, optimizer, LR
// scheduler, grad scaler, data-loader position, RNG states, step) in one directory:
//
//   DIR/manifest.json              {"format": "infini.checkpoint", "version": 1, "step": 120,
//                                   "tensors": "state-120-0.safetensors", "tensors_bytes": ...,
//                                   "parts": ["model", "optimizer", ...], "metadata": {...}}
//   DIR/state-120-0.safetensors    every part's state dict, keys "<part>/<key>"
//
// Saving writes a new tensors file, then the manifest that names it (both atomically), then
// removes tensors files no manifest names: after a crash at any point the directory holds
// either the old checkpoint or the new one, whole. docs/formats.md has the details.
//
//   io::TrainingState state;
//   state.add("model", *model).add("optimizer", optimizer).add("scheduler", scheduler)
//        .add("loader", loader).add_generator("rng", default_generator());
//   state.step = step;
//   io::save_checkpoint("ckpt", state);
//   ...
//   io::load_checkpoint("ckpt", state);  // every part restored, and state.step
export module infini.nn:checkpoint;
import infini.std;
import infini.tensor;
import :state_dict;

export namespace infini::io {

// A checkpoint as data: each part's state dict by part name, the step, and free-form strings
// (a model config, the command line) that travel with it.
struct Checkpoint {
  std::int64_t step = 0;
  std::map<std::string, StateDict> parts;
  std::map<std::string, std::string> metadata;
};

// Writes `checkpoint` into directory `dir` (created if missing) as described above. Error
// for a part name that is empty or contains '/'; IOError when a file cannot be written.
void save_checkpoint(const std::filesystem::path& dir, const Checkpoint& checkpoint);

// Reads the checkpoint in `dir`. IOError naming the file and what is wrong when the manifest
// is missing or invalid, the tensors file is missing, has another size than the manifest
// says or is not valid safetensors, or a tensor belongs to no listed part.
Checkpoint load_checkpoint(const std::filesystem::path& dir);

// Anything with state_dict() and load_state_dict(StateDict): a Module, Optimizer,
// LRScheduler, GradScaler, DataLoader.
template <class T>
concept Stateful = requires(T& object, const StateDict& state) {
  { object.state_dict() } -> std::convertible_to<StateDict>;
  object.load_state_dict(state);
};

// The live objects of a training run, by part name, with the step and metadata: what
// save_checkpoint collects and load_checkpoint restores. The objects must outlive it.
class TrainingState {
 public:
  std::int64_t step = 0;
  std::map<std::string, std::string> metadata;

  // Registers `object` as part `name`; Error when the name is empty, contains '/' or is taken.
  template <Stateful T>
  TrainingState& add(std::string name, T& object) {
    return add_part(std::move(name), [&object] { return StateDict(object.state_dict()); },
                    [&object](const StateDict& state) { object.load_state_dict(state); });
  }
  // Registers a random generator's (seed, offset) as part `name`.
  TrainingState& add_generator(std::string name, Generator& generator);

  // The parts' current state dicts, step and metadata.
  Checkpoint capture() const;
  // Loads every part in registration order, then sets step and metadata. Error naming the
  // parts when the checkpoint lacks a registered part or has one that is not registered
  // (checked before anything is loaded).
  void restore(const Checkpoint& checkpoint);

 private:
  struct Part {
    std::string name;
    std::function<StateDict()> save;
    std::function<void(const StateDict&)> load;
  };
  TrainingState& add_part(std::string name, std::function<StateDict()> save,
                          std::function<void(const StateDict&)> load);

  std::vector<Part> parts_;
};

// save_checkpoint(dir, state.capture()) and state.restore(load_checkpoint(dir)).
void save_checkpoint(const std::filesystem::path& dir, const TrainingState& state);
void load_checkpoint(const std::filesystem::path& dir, TrainingState& state);

// A generator's state as {"seed", "offset"} (0-d int64 tensors holding the 64 bits), and back.
StateDict generator_state_dict(Generator& generator);
void load_generator_state_dict(Generator& generator, const StateDict& state);

}  // namespace infini::io
