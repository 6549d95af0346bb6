// The API pipeline schedules are written against. A schedule is a coroutine that runs on
// every pipeline rank and says in which order that rank's stage does its forward and backward
// passes of the step's micro-batches; the stage does the communication: forward(i) awaits
// micro-batch i's input from the previous stage (receives are posted early), computes, and
// starts sending the output on (not awaited); backward(i) likewise with the output's gradient
// from the next stage and the input's gradient back. The same schedule runs on real process
// groups (pipeline_lab, the trainers) and on the simulator's virtual clock
// (pipeline_simulator.cppm), which checks it before a real run.
//
//   parallel::Task one_f_one_b(parallel::PipelineStage& s) {
//     const int p = s.shape().stages, m = s.shape().micro_batches;
//     const int warmup = std::min(p - s.rank() - 1, m);
//     for (int i = 0; i < warmup; ++i) co_await s.forward(i);
//     for (int i = warmup; i < m; ++i) {
//       co_await s.forward(i);
//       co_await s.backward(i - warmup);
//     }
//     for (int i = m - warmup; i < m; ++i) co_await s.backward(i);
//   }
export module infini.parallel:pipeline_stage;
import infini.std;
import :runtime;
import :asio;

export namespace infini::parallel {

using Task = asio::awaitable<void>;

// p pipeline ranks, each holding v model chunks (interleaved schedules: chunk c of rank r is
// virtual stage c p + r of the p v), and m micro-batches per step.
struct PipelineShape {
  int stages = 1;
  int virtual_stages = 1;
  int micro_batches = 1;

  int virtual_stage(int rank, int chunk) const { return chunk * stages + rank; }
  int last_virtual_stage() const { return stages * virtual_stages - 1; }
  // Error naming the field unless every count is >= 1.
  void validate() const;
};

enum class PipelineOp : std::uint8_t { Forward, Backward, BackwardInput, BackwardWeight };
std::string_view name(PipelineOp op);  // "forward", "backward", "backward_input", "backward_weight"
char letter(PipelineOp op);            // 'F', 'B' (the whole backward), 'b' (input gradient), 'W'

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  virtual int rank() const = 0;  // in the pipeline group: 0 .. p - 1
  virtual const PipelineShape& shape() const = 0;

  // Forward of micro-batch `micro` through chunk `chunk`.
  virtual Task forward(int micro, int chunk = 0) = 0;
  // Backward of it: the input gradient (sent back) and the weight gradients.
  virtual Task backward(int micro, int chunk = 0) = 0;
  // Zero-bubble split of backward: the input gradient now (sent back at once) ...
  virtual Task backward_input(int micro, int chunk = 0) = 0;
  // ... and the weight gradients later (after backward_input of the same micro-batch).
  virtual Task backward_weight(int micro, int chunk = 0) = 0;
};

using Schedule = std::function<Task(PipelineStage&)>;

// Checks a schedule's calls on one rank as a stage sees them: each forward once, a backward
// only after its forward, a weight gradient only after its input gradient, nothing twice,
// micro-batch and chunk in range; finish() checks everything ran. Errors name the rank, the
// call and its position in the rank's sequence.
class ScheduleChecker {
 public:
  ScheduleChecker(int rank, PipelineShape shape);
  void check(PipelineOp op, int micro, int chunk);
  void finish() const;
  // Forwards whose input gradient is not computed yet: the activations held.
  int activations_held() const { return held_; }
  int peak_activations() const { return peak_; }

 private:
  enum Done : std::uint8_t { kForward = 1, kInput = 2, kWeight = 4 };
  std::uint8_t& state(int micro, int chunk) { return done_[static_cast<std::size_t>(chunk * shape_.micro_batches + micro)]; }
  int rank_;
  PipelineShape shape_;
  std::vector<std::uint8_t> done_;  // Done bits per (chunk, micro)
  int calls_ = 0, held_ = 0, peak_ = 0;
};

// The built-in schedules.
//   gpipe:        every forward, then every backward (in reverse).
//   1f1b:         p - r - 1 warm-up forwards, then one forward and one backward, then the
//                 remaining backwards (Megatron's non-interleaved schedule).
//   interleaved:  1F1B over v chunks per rank (Megatron's virtual-stage order); needs
//                 m a multiple of p.
//   zb-h1:        1F1B with backward split (Qi et al.'s ZB-H1): input gradients in 1F1B
//                 order, each weight gradient right after its input gradient except rank r's
//                 first r, which run at the end; the bubble shrinks to (p - 1)(F + B - W)
//                 with 1F1B's activation memory.
Task gpipe(PipelineStage& stage);
Task one_f_one_b(PipelineStage& stage);
Task interleaved_one_f_one_b(PipelineStage& stage);
Task zero_bubble_h1(PipelineStage& stage);
// "gpipe", "1f1b", "interleaved", "zb-h1"; Error listing them for another name.
Schedule schedule_by_name(std::string_view name);
// Error unless the schedule `name` can run `shape` (interleaved: m % p == 0 and v >= 2; the
// others: v == 1).
void check_schedule_shape(std::string_view name, const PipelineShape& shape);

}  // namespace infini::parallel
