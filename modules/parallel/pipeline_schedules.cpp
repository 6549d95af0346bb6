// The built-in pipeline schedules (see pipeline_stage.cppm) and the schedule checker.
module;
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {

void PipelineShape::validate() const {
  if (stages < 1 || virtual_stages < 1 || micro_batches < 1)
    throw Error("PipelineShape", concat("stages ", stages, ", virtual_stages ", virtual_stages, " and micro_batches ",
                                        micro_batches, " must all be >= 1"));
}

std::string_view name(PipelineOp op) {
  switch (op) {
    case PipelineOp::Forward: return "forward";
    case PipelineOp::Backward: return "backward";
    case PipelineOp::BackwardInput: return "backward_input";
    case PipelineOp::BackwardWeight: return "backward_weight";
  }
  return "?";
}

char letter(PipelineOp op) {
  switch (op) {
    case PipelineOp::Forward: return 'F';
    case PipelineOp::Backward: return 'B';
    case PipelineOp::BackwardInput: return 'b';
    case PipelineOp::BackwardWeight: return 'W';
  }
  return '?';
}

ScheduleChecker::ScheduleChecker(int rank, PipelineShape shape)
    : rank_(rank), shape_(shape), done_(static_cast<std::size_t>(shape.micro_batches * shape.virtual_stages), 0) {
  shape_.validate();
}

void ScheduleChecker::check(PipelineOp op, int micro, int chunk) {
  const int call = calls_++;
  auto where = [&] { return concat("pipeline rank ", rank_, ", call ", call, ": ", name(op), "(", micro, ", ", chunk, ")"); };
  if (micro < 0 || micro >= shape_.micro_batches || chunk < 0 || chunk >= shape_.virtual_stages)
    throw IndexError("pipeline schedule", concat(where(), " is out of range (", shape_.micro_batches, " micro-batches, ",
                                                 shape_.virtual_stages, " chunks)"));
  std::uint8_t& s = state(micro, chunk);
  auto fail = [&](const char* why) { throw Error("pipeline schedule", concat(where(), ": ", why)); };
  switch (op) {
    case PipelineOp::Forward:
      if (s & kForward) fail("its forward already ran");
      s |= kForward;
      peak_ = std::max(peak_, ++held_);
      return;
    case PipelineOp::Backward:
    case PipelineOp::BackwardInput:
      if (!(s & kForward)) fail("its forward has not run");
      if (s & kInput) fail("its backward already ran");
      s |= op == PipelineOp::Backward ? kInput | kWeight : kInput;
      --held_;
      return;
    case PipelineOp::BackwardWeight:
      if (!(s & kInput)) fail("its backward_input has not run");
      if (s & kWeight) fail("its weight gradients already ran");
      s |= kWeight;
      return;
  }
}

void ScheduleChecker::finish() const {
  for (int c = 0; c < shape_.virtual_stages; ++c)
    for (int i = 0; i < shape_.micro_batches; ++i) {
      const std::uint8_t s = done_[static_cast<std::size_t>(c * shape_.micro_batches + i)];
      if (s != (kForward | kInput | kWeight))
        throw Error("pipeline schedule",
                    concat("pipeline rank ", rank_, " ended the step without ",
                           !(s & kForward) ? "the forward" : !(s & kInput) ? "the backward" : "the weight gradients",
                           " of micro-batch ", i, ", chunk ", c));
    }
}

Task gpipe(PipelineStage& s) {
  const int m = s.shape().micro_batches;
  for (int i = 0; i < m; ++i) co_await s.forward(i);
  for (int i = m - 1; i >= 0; --i) co_await s.backward(i);
}

Task one_f_one_b(PipelineStage& s) {
  const int p = s.shape().stages, m = s.shape().micro_batches;
  const int warmup = std::min(p - s.rank() - 1, m);
  for (int i = 0; i < warmup; ++i) co_await s.forward(i);
  for (int i = warmup; i < m; ++i) {
    co_await s.forward(i);
    co_await s.backward(i - warmup);
  }
  for (int i = m - warmup; i < m; ++i) co_await s.backward(i);
}

Task interleaved_one_f_one_b(PipelineStage& s) {
  const PipelineShape& shape = s.shape();
  const int p = shape.stages, v = shape.virtual_stages, m = shape.micro_batches, total = m * v;
  // Virtual micro-step k: micro-batches go p at a time through chunk 0, then chunk 1, ...;
  // backwards through the chunks in reverse.
  auto micro = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto forward_chunk = [&](int k) { return (k / p) % v; };
  auto backward_chunk = [&](int k) { return v - 1 - (k / p) % v; };
  const int warmup = std::min((p - s.rank() - 1) * 2 + (v - 1) * p, total);
  for (int k = 0; k < warmup; ++k) co_await s.forward(micro(k), forward_chunk(k));
  for (int k = warmup; k < total; ++k) {
    co_await s.forward(micro(k), forward_chunk(k));
    co_await s.backward(micro(k - warmup), backward_chunk(k - warmup));
  }
  for (int k = total - warmup; k < total; ++k) co_await s.backward(micro(k), backward_chunk(k));
}

Task zero_bubble_h1(PipelineStage& s) {
  const int p = s.shape().stages, m = s.shape().micro_batches, r = s.rank();
  const int warmup = std::min(p - r - 1, m);
  // Rank r runs the weight gradients of its first r micro-batches last: its input gradients go
  // back sooner, which shortens the cool-down's chain of them through the ranks before it,
  // and the deferred weight gradients fill the time rank r would idle at the end.
  const int deferred = std::min(r, m);
  auto input_gradient = [&](int i) -> Task {
    co_await s.backward_input(i);
    if (i >= deferred) co_await s.backward_weight(i);
  };
  for (int i = 0; i < warmup; ++i) co_await s.forward(i);
  for (int i = warmup; i < m; ++i) {
    co_await s.forward(i);
    co_await input_gradient(i - warmup);
  }
  for (int i = m - warmup; i < m; ++i) co_await input_gradient(i);
  for (int i = 0; i < deferred; ++i) co_await s.backward_weight(i);
}

Schedule schedule_by_name(std::string_view name) {
  if (name == "gpipe") return gpipe;
  if (name == "1f1b") return one_f_one_b;
  if (name == "interleaved") return interleaved_one_f_one_b;
  if (name == "zb-h1") return zero_bubble_h1;
  throw Error("schedule_by_name", concat("unknown pipeline schedule \"", name, "\" (expected gpipe, 1f1b, interleaved or zb-h1)"));
}

void check_schedule_shape(std::string_view name, const PipelineShape& shape) {
  shape.validate();
  schedule_by_name(name);
  if (name == "interleaved") {
    if (shape.virtual_stages < 2)
      throw Error("pipeline schedule", "interleaved needs virtual_stages >= 2 (chunks per pipeline rank)");
    if (shape.micro_batches % shape.stages != 0)
      throw Error("pipeline schedule", concat("interleaved runs micro-batches in groups of the ", shape.stages,
                                              " pipeline ranks: micro_batches ", shape.micro_batches,
                                              " must be a multiple of ", shape.stages));
  } else if (shape.virtual_stages != 1) {
    throw Error("pipeline schedule", concat(name, " runs one chunk per pipeline rank: virtual_stages must be 1, got ",
                                            shape.virtual_stages));
  }
}

}  // namespace infini::parallel
