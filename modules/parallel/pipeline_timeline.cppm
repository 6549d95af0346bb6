// What a pipeline step did on each rank: its compute intervals, from the simulator's virtual
// clock or from a real run's steady clock (seconds from the step's start). Renders as text,
// SVG and a Chrome trace (chrome://tracing, Perfetto), and measures the bubble.
export module infini.parallel:pipeline_timeline;
import infini.std;
import :pipeline_stage;

export namespace infini::parallel {

struct TimelineEvent {
  PipelineOp op;
  int micro = 0, chunk = 0;
  double start = 0, end = 0;  // seconds
};

struct PipelineTimeline {
  PipelineShape shape;
  std::vector<std::vector<TimelineEvent>> ranks;  // [rank] in the order the rank ran them

  // From the earliest start to the latest end.
  double step_time() const;
  double busy_time(int rank) const;
  // Idle share of the ranks' time over the step: 1 - sum of busy times / (p x step time).
  double bubble_fraction() const;
  // Most forwards whose input gradient was not yet computed, on `rank`.
  int peak_activations(int rank) const;

  // One line per rank, `width` columns over the step: the op's letter ('F', 'B', 'b', 'W')
  // where the rank computes, '.' where it idles; then each rank's ops in order ("F0 F1 B0 ...",
  // with ".c" for chunk c when there are several).
  std::string text(int width = 100) const;
  // An SVG image: one row per rank, a box per op labelled with its micro-batch.
  std::string svg() const;
  // Chrome's trace event format: one complete event per op, a thread per rank.
  std::string chrome_trace() const;
};

// Theoretical bubble fraction of a step of m micro-batches on p ranks with per-micro-batch
// times F, B (input gradient) and W (weight gradients) of a whole stage:
//   gpipe, 1f1b: (p - 1) / (m + p - 1);
//   interleaved: (p - 1)(F + B + W) / v over m (F + B + W) + that;
//   zb-h1: (p - 1)(F + B - W) over m (F + B + W) + that.
double theoretical_bubble(std::string_view schedule, const PipelineShape& shape, double forward, double backward_input,
                          double backward_weight);

}  // namespace infini::parallel
