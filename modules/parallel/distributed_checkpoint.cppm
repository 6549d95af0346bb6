// Distributed checkpoints (PyTorch DCP, Megatron's dist_checkpointing): every rank writes only
// the chunks it holds of the whole model's tensors (ShardedTensor), and a manifest records
// every tensor's global shape and where each chunk lives. Loading reads, for each of the
// reader's own ShardedTensors, the chunks that overlap it, so a checkpoint saved under one
// layout (dp x tp x pp, any ZeRO stage) loads under any other, or in one process.
//
//   DIR/checkpoint.json                          the manifest (rank 0 writes it last)
//   DIR/shard-<step>-<k>-<rank>.safetensors      a rank's chunks, tensors "<key>#<j>"
//
// A save is atomic across the ranks: the ranks agree on who writes each chunk (the lowest
// rank holding it, so replicated tensors are written once), each writes its file under a new
// name, they agree that every file is complete, and only then rank 0 replaces the manifest
// and removes the files of earlier saves. A rank that dies or fails before that leaves the
// previous checkpoint as it was. docs/formats.md has the manifest's fields.
//
//   parallel::save_distributed_checkpoint("ckpt", step, plan.sharded_state(), world);
//   parallel::DistributedCheckpoint checkpoint("ckpt");   // any layout
//   plan.load_sharded_state(checkpoint);
export module infini.parallel:distributed_checkpoint;
import infini.std;
import infini.nn;
import :process_group;
import :sharded_tensor;

export namespace infini::parallel {

struct DistributedSaveOptions {
  std::map<std::string, std::string> metadata = {};  // free-form strings (layout, config)
  // Called on this rank once its shard file is written, before the ranks agree that the save
  // is complete (tests end a rank there to check that the previous checkpoint survives).
  std::function<void()> after_shard_written = {};
};

// Collective over `group` (null: one process): saves every rank's `tensors` into `dir`
// (created if missing) as described above. Every rank must give the same dtype and global
// shape for a key, and together the ranks must hold every element of each tensor: Error naming
// the key otherwise (raised on every rank, before anything is written). IOError from the rank
// whose file could not be written, Error on the others; the previous checkpoint stays.
void save_distributed_checkpoint(const std::filesystem::path& dir, std::int64_t step,
                                 const std::vector<ShardedTensor>& tensors, const std::shared_ptr<ProcessGroup>& group,
                                 const DistributedSaveOptions& options = {});

// A save whose files are written on a background thread (DCP's async_save): construction
// (collective) agrees the plan and copies this rank's chunks to host memory, which is all a
// training step waits for; the thread then writes the shard file. commit() (collective) waits
// for it and, once every rank's file is written, publishes the manifest as the synchronous
// save does. Destroying an uncommitted save waits for the thread and publishes nothing.
class AsyncCheckpointSave {
 public:
  AsyncCheckpointSave(const std::filesystem::path& dir, std::int64_t step, const std::vector<ShardedTensor>& tensors,
                      std::shared_ptr<ProcessGroup> group, DistributedSaveOptions options = {});
  ~AsyncCheckpointSave();
  AsyncCheckpointSave(const AsyncCheckpointSave&) = delete;
  AsyncCheckpointSave& operator=(const AsyncCheckpointSave&) = delete;

  std::int64_t step() const;
  // Collective: whether every rank's file is written (nothing waits).
  bool written_everywhere();
  // Collective: waits for this rank's file and publishes the checkpoint (errors as above).
  void commit();

  struct State;  // the agreed plan and this rank's file (shared with the synchronous save)

 private:
  std::unique_ptr<State> state_;
  std::thread writer_;
};

// Where a chunk is stored: file index (into DistributedCheckpoint::files()) and tensor name.
struct StoredChunk {
  Chunk chunk;
  std::size_t file = 0;
  std::string name;
};

struct StoredTensor {
  DataType dtype = kFloat32;
  Shape shape;
  std::vector<StoredChunk> chunks;
};

struct ShardFile {
  std::string name;
  std::uint64_t bytes = 0;
  int rank = 0;  // the rank that wrote it
};

class DistributedCheckpoint {
 public:
  // Reads and checks DIR/checkpoint.json: IOError naming it and what is wrong. The shard
  // files are checked when read() opens them.
  explicit DistributedCheckpoint(std::filesystem::path dir);

  const std::filesystem::path& dir() const { return dir_; }
  std::int64_t step() const { return step_; }
  int world_size() const { return world_size_; }  // of the run that saved it
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<ShardFile>& files() const { return files_; }
  const std::map<std::string, StoredTensor>& tensors() const { return tensors_; }
  bool contains(const std::string& key) const { return tensors_.contains(key); }

  // Each target's elements (its key and chunks) as a new contiguous CPU tensor of the saved
  // dtype and target.local's shape, read from the shard files that hold them. All or nothing:
  // Error naming the key for a tensor the checkpoint lacks or whose global shape differs;
  // IOError naming the file and the tensor for a shard file that is missing, has another
  // size than the manifest says, is not valid safetensors, or lacks the chunk or holds it with
  // another dtype or size; IOError naming the tensor when its chunks leave out or repeat an
  // element the target needs.
  std::vector<Tensor> read(const std::vector<ShardedTensor>& targets) const;
  // Every tensor whose key starts with `prefix`, whole, by the rest of its key ("scheduler/").
  StateDict read_whole(const std::string& prefix) const;

 private:
  std::filesystem::path dir_;
  std::int64_t step_ = 0;
  int world_size_ = 1;
  std::map<std::string, std::string> metadata_;
  std::vector<ShardFile> files_;
  std::map<std::string, StoredTensor> tensors_;
};

// Whether `dir` holds a distributed checkpoint (its manifest exists).
bool is_distributed_checkpoint(const std::filesystem::path& dir);

}  // namespace infini::parallel
