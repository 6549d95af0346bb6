#include "synthetic_stage.h"

#include <coroutine>
#include <cstdint>
#include <utility>

namespace pipeline_lab {

using namespace infini;
using namespace infini::parallel;
using SteadyClock = std::chrono::steady_clock;

SyntheticStage::SyntheticStage(std::shared_ptr<ProcessGroup> group, PipelineShape shape, PipelineCosts costs, bool spin)
    : group_(std::move(group)),
      rank_(group_->rank()),
      shape_(shape),
      costs_(costs),
      spin_(spin),
      checker_(rank_, shape),
      start_(SteadyClock::now()),
      payload_(zeros({static_cast<std::int64_t>(costs.message_bytes)}, {.dtype = kUInt8})) {
  const int p = shape_.stages;
  for (int c = 0; c < shape_.virtual_stages; ++c)
    for (int i = 0; i < shape_.micro_batches; ++i) {
      const int stage = shape_.virtual_stage(rank_, c);
      for (const bool gradient : {false, true}) {
        if (gradient ? stage == shape_.last_virtual_stage() : stage == 0) continue;
        const Key key{gradient, i, stage};
        Tensor buffer = empty(payload_.shape(), {.dtype = kUInt8});
        const int from = (gradient ? stage + 1 : stage - 1) % p;
        Work work = group_->recv(buffer, from, tag(key));
        receives_.emplace(key, std::pair{buffer, std::move(work)});
      }
    }
}

// Activations and gradients apart (with two ranks "next" and "previous" are the same rank),
// and every (micro-batch, virtual stage) its own.
int SyntheticStage::tag(const Key& key) const {
  const auto [gradient, micro, stage] = key;
  return (micro * (shape_.last_virtual_stage() + 1) + stage) * 2 + (gradient ? 1 : 0);
}

Work SyntheticStage::received(const Key& key) const { return receives_.at(key).second; }

void SyntheticStage::send(Key key, int to) { sends_.push_back(group_->send(payload_, to, tag(key))); }

Task SyntheticStage::forward(int micro, int chunk) {
  checker_.check(PipelineOp::Forward, micro, chunk);
  const int stage = shape_.virtual_stage(rank_, chunk);
  if (stage > 0) co_await received({false, micro, stage});
  co_await compute(PipelineOp::Forward, micro, chunk, costs_.forward);
  if (stage < shape_.last_virtual_stage()) send({false, micro, stage + 1}, (stage + 1) % shape_.stages);
}

Task SyntheticStage::backward(int micro, int chunk) {
  return input_gradient(PipelineOp::Backward, micro, chunk, costs_.backward_input + costs_.backward_weight);
}

Task SyntheticStage::backward_input(int micro, int chunk) {
  return input_gradient(PipelineOp::BackwardInput, micro, chunk, costs_.backward_input);
}

Task SyntheticStage::backward_weight(int micro, int chunk) {
  checker_.check(PipelineOp::BackwardWeight, micro, chunk);
  co_await compute(PipelineOp::BackwardWeight, micro, chunk, costs_.backward_weight);
}

Task SyntheticStage::input_gradient(PipelineOp op, int micro, int chunk, double seconds) {
  checker_.check(op, micro, chunk);
  const int stage = shape_.virtual_stage(rank_, chunk);
  if (stage < shape_.last_virtual_stage()) co_await received({true, micro, stage});
  co_await compute(op, micro, chunk, seconds);
  if (stage > 0) send({true, micro, stage - 1}, (stage - 1) % shape_.stages);
}

// `seconds` of a whole stage, 1 / v of it for a chunk.
Task SyntheticStage::compute(PipelineOp op, int micro, int chunk, double seconds) {
  const auto begin = SteadyClock::now();
  const auto end = begin + std::chrono::duration_cast<SteadyClock::duration>(
                               std::chrono::duration<double>(seconds / shape_.virtual_stages));
  if (spin_) {
    while (SteadyClock::now() < end) {
    }
  } else {
    asio::steady_timer timer(io_context(), end);
    co_await timer.async_wait(asio::use_awaitable);
  }
  auto since_start = [&](SteadyClock::time_point t) { return std::chrono::duration<double>(t - start_).count(); };
  events_.push_back({op, micro, chunk, since_start(begin), since_start(SteadyClock::now())});
}

Task SyntheticStage::finish() {
  co_await when_all(sends_);
  checker_.finish();
}

}  // namespace pipeline_lab
