// pipeline_lab: runs a pipeline schedule on synthetic stages (compute times, no model) and
// shows where the time goes: each rank's timeline as text, an SVG and a Chrome trace, the
// bubble fraction against theory and the activations each rank holds at most.
//   pipeline_lab --schedule zb-h1 --stages 4 --micro_batches 8          # simulated, one process
//   mpirun -np 4 pipeline_lab --schedule 1f1b --micro_batches 8 --forward_ms 20
// Under mpirun it runs for real (sleeping or spinning compute, real messages between the
// ranks) after a dry run on the simulator, and prints the simulator's prediction beside the
// measurement. The last line is a JSON summary.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "synthetic_stage.h"

using namespace infini;
using namespace infini::parallel;
using pipeline_lab::SyntheticStage;

namespace {

struct Flags {
  std::string schedule = "1f1b", mode = "auto", compute = "sleep", svg, trace;
  int stages = 4, virtual_stages = 1, micro_batches = 8, steps = 3, width = 100;
  double forward_ms = 10, backward_ms = 10, weight_ms = 10, message_bytes = 0, latency_us = 0, bandwidth_gbps = 0;
};

PipelineCosts costs_of(const Flags& f) {
  return {.forward = f.forward_ms / 1e3, .backward_input = f.backward_ms / 1e3, .backward_weight = f.weight_ms / 1e3,
          .message_bytes = f.message_bytes, .latency = f.latency_us / 1e6, .bandwidth = f.bandwidth_gbps * 1e9};
}

void write_file(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  const std::filesystem::path target(path), partial(path + ".partial");
  {
    std::ofstream out(partial);
    if (!(out << text) || !out.flush()) throw IOError("pipeline_lab", "cannot write " + partial.string());
  }
  std::filesystem::rename(partial, target);
}

// The timeline, bubble against theory, peak activations, files; `predicted`: the simulator's
// step time for a real run (0 for a simulated one).
void report(const Flags& f, const PipelineTimeline& t, const char* mode, double predicted) {
  const PipelineCosts c = costs_of(f);
  const double theory = theoretical_bubble(f.schedule, t.shape, c.forward, c.backward_input, c.backward_weight);
  std::printf("%s %s: p=%d v=%d m=%d, F %.3g ms, B %.3g ms, W %.3g ms per stage and micro-batch\n%s", mode,
              f.schedule.c_str(), t.shape.stages, t.shape.virtual_stages, t.shape.micro_batches, f.forward_ms,
              f.backward_ms, f.weight_ms, t.text(f.width).c_str());
  std::string peaks;
  for (int r = 0; r < t.shape.stages; ++r) peaks += concat(r ? ", " : "", t.peak_activations(r));
  std::printf("step %.3f ms | bubble %.2f%% (theory %.2f%%) | peak activations per rank [%s]\n", t.step_time() * 1e3,
              t.bubble_fraction() * 100, theory * 100, peaks.c_str());
  if (predicted > 0)
    std::printf("simulated step %.3f ms: measured/simulated %.3f\n", predicted * 1e3, t.step_time() / predicted);
  write_file(f.svg, t.svg());
  write_file(f.trace, t.chrome_trace());
  std::printf("{\"summary\": {\"mode\": \"%s\", \"schedule\": \"%s\", \"stages\": %d, \"virtual_stages\": %d, "
              "\"micro_batches\": %d, \"step_ms\": %.6f, \"bubble\": %.9f, \"theory\": %.9f, \"simulated_step_ms\": %.6f}}\n",
              mode, f.schedule.c_str(), t.shape.stages, t.shape.virtual_stages, t.shape.micro_batches,
              t.step_time() * 1e3, t.bubble_fraction(), theory, predicted * 1e3);
}

// Every rank's events (the same count on each: every op once) into rank order.
PipelineTimeline gather_timeline(ProcessGroup& group, const PipelineShape& shape,
                                 const std::vector<TimelineEvent>& events) {
  const std::int64_t n = static_cast<std::int64_t>(events.size());
  std::vector<double> packed;
  for (const TimelineEvent& e : events)
    packed.insert(packed.end(), {static_cast<double>(e.op), static_cast<double>(e.micro),
                                 static_cast<double>(e.chunk), e.start, e.end});
  const Tensor mine = from_vector(packed, {n, 5});
  Tensor all = empty({group.size(), n, 5}, {.dtype = kFloat64});
  group.all_gather(all, mine).wait();
  PipelineTimeline timeline{.shape = shape, .ranks = {}};
  const double* d = all.data_ptr<double>();
  for (int r = 0; r < group.size(); ++r) {
    timeline.ranks.emplace_back();
    for (std::int64_t k = 0; k < n; ++k, d += 5)
      timeline.ranks.back().push_back({static_cast<PipelineOp>(static_cast<int>(d[0])), static_cast<int>(d[1]),
                                       static_cast<int>(d[2]), d[3], d[4]});
  }
  return timeline;
}

Task real_step(SyntheticStage& stage, const Schedule& schedule) {
  co_await schedule(stage);
  co_await stage.finish();
}

int run_real(const Flags& f) {
  auto world = init_process_group();
  const PipelineShape shape{.stages = world->size(), .virtual_stages = f.virtual_stages, .micro_batches = f.micro_batches};
  check_schedule_shape(f.schedule, shape);
  const Schedule schedule = schedule_by_name(f.schedule);
  // The dry run: a schedule that would deadlock or leave a message unreceived fails here.
  const double predicted = simulate_pipeline(schedule, shape, costs_of(f)).step_time();
  PipelineTimeline timeline;
  for (int step = 0; step < f.steps; ++step) {  // the first warms up; the last is reported
    world->barrier().wait();
    SyntheticStage stage(world, shape, costs_of(f), f.compute == "spin");
    run(real_step(stage, schedule));
    timeline = gather_timeline(*world, shape, stage.events());
  }
  if (world->rank() == 0) report(f, timeline, "real", predicted);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"Runs a pipeline schedule on synthetic stages, simulated or under mpirun."};
  app.add_option("--schedule", f.schedule, "gpipe, 1f1b, interleaved or zb-h1")
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved", "zb-h1"}));
  app.add_option("--mode", f.mode, "auto (real under mpirun, else simulated), simulate or real")
      ->check(CLI::IsMember({"auto", "simulate", "real"}));
  app.add_option("--stages", f.stages, "pipeline ranks when simulated (under mpirun: the world size)")
      ->check(CLI::PositiveNumber);
  app.add_option("--virtual_stages", f.virtual_stages, "chunks per rank (interleaved)")->check(CLI::PositiveNumber);
  app.add_option("--micro_batches", f.micro_batches)->check(CLI::PositiveNumber);
  app.add_option("--forward_ms", f.forward_ms, "forward time of a stage per micro-batch")->check(CLI::NonNegativeNumber);
  app.add_option("--backward_ms", f.backward_ms, "input-gradient time")->check(CLI::NonNegativeNumber);
  app.add_option("--weight_ms", f.weight_ms, "weight-gradient time")->check(CLI::NonNegativeNumber);
  app.add_option("--message_bytes", f.message_bytes, "bytes of each activation and gradient")->check(CLI::NonNegativeNumber);
  app.add_option("--latency_us", f.latency_us, "simulated link latency per message")->check(CLI::NonNegativeNumber);
  app.add_option("--bandwidth_gbps", f.bandwidth_gbps, "simulated link bandwidth, GB/s (0: unlimited)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--compute", f.compute, "real mode: sleep (on the rank's io_context) or spin (the CPU)")
      ->check(CLI::IsMember({"sleep", "spin"}));
  app.add_option("--steps", f.steps, "real mode: steps run (the last is reported)")->check(CLI::PositiveNumber);
  app.add_option("--svg", f.svg, "write the timeline as an SVG image");
  app.add_option("--trace", f.trace, "write the timeline as a Chrome trace (JSON)");
  app.add_option("--width", f.width, "columns of the text timeline")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const bool real = f.mode == "real" || (f.mode == "auto" && launched_by_mpirun());
  try {
    if (real) return run_real(f);
    const PipelineShape shape{.stages = f.stages, .virtual_stages = f.virtual_stages, .micro_batches = f.micro_batches};
    check_schedule_shape(f.schedule, shape);
    report(f, simulate_pipeline(schedule_by_name(f.schedule), shape, costs_of(f)), "simulated", 0);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipeline_lab: %s\n", e.what());
    if (real) abort_job(1);
    return 1;
  }
}
