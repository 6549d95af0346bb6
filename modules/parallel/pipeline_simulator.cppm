// Runs a pipeline schedule for all p ranks in this process on a virtual clock (discrete
// events): the same schedule coroutine as a real run, with compute taking its configured time
// and messages arriving after their link's latency and transfer time. It is the dry run that
// checks a schedule before a real one (every call valid, every message received, no rank
// waiting forever) and pipeline_lab's simulated mode.
export module infini.parallel:pipeline_simulator;
import infini.std;
import :pipeline_stage;
import :pipeline_timeline;

export namespace infini::parallel {

struct PipelineCosts {
  // Seconds per micro-batch through a whole stage (a chunk of v takes 1 / v of it). The
  // fused backward takes backward_input + backward_weight.
  double forward = 1, backward_input = 1, backward_weight = 1;
  double message_bytes = 0;  // per activation or gradient message
  double latency = 0;        // seconds per message
  double bandwidth = 0;      // bytes per second of a link, each direction (0: unlimited); one message at a time
};

// The step's timeline. Errors (infini::Error): a call the schedule makes out of order (see
// ScheduleChecker: names the rank, the call and its position), a deadlock (names every
// waiting rank, what it waits for and the virtual time), or a message sent and never received.
PipelineTimeline simulate_pipeline(const Schedule& schedule, const PipelineShape& shape, const PipelineCosts& costs);

}  // namespace infini::parallel
