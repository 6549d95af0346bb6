// Pipeline schedules on the simulator (one process, virtual clock): the op orders of the
// built-in schedules, bubble fractions against theory for p = 4, m = 8, and schedules that
// must be rejected (calls out of order, deadlocks, missing micro-batches).
#include <gtest/gtest.h>

#include <algorithm>
#include <coroutine>
#include <cstdint>
#include <string>
#include <vector>

import infini.parallel;

namespace infini::parallel::test::pipeline_schedule_test {
namespace {

// rank's ops as "F0 F1 B0 ..." (".c" for chunk c when there are several).
std::string ops(const PipelineTimeline& timeline, int rank) {
  const std::string text = timeline.text(10);
  const std::string prefix = concat("rank ", rank, ":");
  const auto start = text.find(prefix);
  return text.substr(start + prefix.size() + 1, text.find('\n', start) - start - prefix.size() - 1);
}

TEST(PipelineSchedules, OpOrders) {
  const PipelineShape shape{.stages = 4, .virtual_stages = 1, .micro_batches = 6};
  const PipelineCosts unit{};
  const PipelineTimeline gpipe_timeline = simulate_pipeline(gpipe, shape, unit);
  EXPECT_EQ(ops(gpipe_timeline, 1), "F0 F1 F2 F3 F4 F5 B5 B4 B3 B2 B1 B0");
  const PipelineTimeline one = simulate_pipeline(one_f_one_b, shape, unit);
  EXPECT_EQ(ops(one, 0), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");  // 3 warm-up forwards
  EXPECT_EQ(ops(one, 3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  EXPECT_EQ(one.peak_activations(0), 4);
  EXPECT_EQ(one.peak_activations(3), 1);
  EXPECT_EQ(gpipe_timeline.peak_activations(0), 6);
  // Interleaved, p = 2, v = 2, m = 4: rank 0 warms up with (p - 1) 2 + (v - 1) p = 4 forwards.
  const PipelineTimeline interleaved =
      simulate_pipeline(interleaved_one_f_one_b, {.stages = 2, .virtual_stages = 2, .micro_batches = 4}, unit);
  EXPECT_EQ(ops(interleaved, 0), "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  // Zero bubble: input gradients in 1F1B order; rank r's first r weight gradients last.
  const PipelineTimeline zb = simulate_pipeline(zero_bubble_h1, shape, unit);
  EXPECT_EQ(ops(zb, 3), "F0 b0 F1 b1 F2 b2 F3 b3 W3 F4 b4 W4 F5 b5 W5 W0 W1 W2");
  EXPECT_EQ(ops(zb, 1), "F0 F1 F2 b0 F3 b1 W1 F4 b2 W2 F5 b3 W3 b4 W4 b5 W5 W0");
  EXPECT_EQ(zb.peak_activations(0), one.peak_activations(0));  // no more than 1F1B's
}

TEST(PipelineSchedules, BubbleFractionsMatchTheory) {
  // p = 4, m = 8, F = B = W = 1 s per stage and micro-batch, free messages.
  const PipelineCosts unit{};
  for (const char* name : {"gpipe", "1f1b", "zb-h1"}) {
    const PipelineShape shape{.stages = 4, .virtual_stages = 1, .micro_batches = 8};
    const PipelineTimeline t = simulate_pipeline(schedule_by_name(name), shape, unit);
    EXPECT_NEAR(t.bubble_fraction(), theoretical_bubble(name, shape, 1, 1, 1), 1e-12) << name;
  }
  const PipelineShape interleaved{.stages = 4, .virtual_stages = 2, .micro_batches = 8};
  const PipelineTimeline t = simulate_pipeline(interleaved_one_f_one_b, interleaved, unit);
  EXPECT_NEAR(t.bubble_fraction(), theoretical_bubble("interleaved", interleaved, 1, 1, 1), 1e-12);
  // Closed forms: 3/11 for 1F1B; (p - 1)(F + B + W) / v = 4.5 over 24 + 4.5; (p - 1)(F + B - W) = 3 over 27.
  EXPECT_NEAR(theoretical_bubble("1f1b", {.stages = 4, .virtual_stages = 1, .micro_batches = 8}, 1, 1, 1), 3.0 / 11, 1e-15);
  EXPECT_NEAR(theoretical_bubble("interleaved", interleaved, 1, 1, 1), 4.5 / 28.5, 1e-15);
  EXPECT_NEAR(theoretical_bubble("zb-h1", {.stages = 4, .virtual_stages = 1, .micro_batches = 8}, 1, 1, 1), 3.0 / 27, 1e-15);
}

TEST(PipelineSchedules, MessagesTakeTheirLinkTime) {
  // Two stages, one micro-batch: F on rank 0, message, F on rank 1, B on rank 1, message, B on rank 0.
  const PipelineCosts costs{.forward = 1, .backward_input = 2, .backward_weight = 0, .message_bytes = 1000,
                            .latency = 0.25, .bandwidth = 4000};
  const PipelineTimeline t = simulate_pipeline(one_f_one_b, {.stages = 2, .virtual_stages = 1, .micro_batches = 1}, costs);
  EXPECT_DOUBLE_EQ(t.ranks[1][0].start, 1.5);  // 1 s forward + 0.25 s transfer + 0.25 s latency
  EXPECT_DOUBLE_EQ(t.step_time(), 1 + 0.5 + 1 + 2 + 0.5 + 2);
}

Task backward_first(PipelineStage& s) {
  co_await s.backward(0);
  co_await s.forward(0);
}

Task last_rank_skips_one(PipelineStage& s) {
  const int m = s.shape().micro_batches - (s.rank() == s.shape().stages - 1 ? 1 : 0);
  for (int i = 0; i < m; ++i) co_await s.forward(i);
  for (int i = m - 1; i >= 0; --i) co_await s.backward(i);
}

// Rank 0 runs its backwards in forward order while rank 1 waits for the opposite order of
// forwards: rank 1 forward(1) first, which needs rank 0's forward(1) ... a cycle.
Task crossed(PipelineStage& s) {
  if (s.rank() == 0) {
    co_await s.forward(0);
    co_await s.backward(0);
    co_await s.forward(1);
    co_await s.backward(1);
  } else {
    co_await s.forward(1);
    co_await s.backward(1);
    co_await s.forward(0);
    co_await s.backward(0);
  }
}

void expect_error(const Schedule& schedule, const PipelineShape& shape, const std::string& expected) {
  try {
    simulate_pipeline(schedule, shape, {});
    ADD_FAILURE() << "expected an error containing \"" << expected << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(PipelineSchedules, BadSchedulesAreRejectedNamingTheStep) {
  const PipelineShape two{.stages = 2, .virtual_stages = 1, .micro_batches = 2};
  expect_error(backward_first, two, "pipeline rank 0, call 0: backward(0, 0): its forward has not run");
  expect_error(last_rank_skips_one, two, "pipeline rank 1 ended the step without the forward of micro-batch 1");
  expect_error(crossed, two, "rank 1 waits for the activation of micro-batch 1 for virtual stage 1");
  expect_error(gpipe, {.stages = 2, .virtual_stages = 1, .micro_batches = 0}, "micro_batches 0");
  EXPECT_THROW(schedule_by_name("2f2b"), Error);
  EXPECT_THROW(check_schedule_shape("interleaved", {.stages = 4, .virtual_stages = 2, .micro_batches = 6}), Error);
  EXPECT_THROW(check_schedule_shape("1f1b", {.stages = 4, .virtual_stages = 2, .micro_batches = 8}), Error);
  EXPECT_NO_THROW(check_schedule_shape("interleaved", {.stages = 4, .virtual_stages = 2, .micro_batches = 8}));
}

// docs/distributed.md's example of a schedule of one's own.
Task eager_one_f_one_b(PipelineStage& s) {
  const int p = s.shape().stages, m = s.shape().micro_batches;
  const int warmup = std::min(p - s.rank(), m);
  for (int i = 0; i < warmup; ++i) co_await s.forward(i);
  for (int i = warmup; i < m; ++i) {
    co_await s.forward(i);
    co_await s.backward(i - warmup);
  }
  for (int i = m - warmup; i < m; ++i) co_await s.backward(i);
}

TEST(PipelineSchedules, OwnScheduleFromTheDocs) {
  const PipelineTimeline t = simulate_pipeline(eager_one_f_one_b, {.stages = 4, .virtual_stages = 1, .micro_batches = 8},
                                               {.forward = 1, .backward_input = 1, .backward_weight = 1});
  EXPECT_EQ(ops(t, 3), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  EXPECT_EQ(t.peak_activations(0), 5);  // one more than 1F1B's 4
  EXPECT_EQ(t.peak_activations(3), 2);
  EXPECT_NEAR(t.bubble_fraction(), 3.0 / 11, 1e-12);  // free messages: no better than 1F1B
}

TEST(PipelineSchedules, RendersTextSvgAndTrace) {
  const PipelineTimeline t = simulate_pipeline(one_f_one_b, {.stages = 2, .virtual_stages = 1, .micro_batches = 2}, {});
  // A step of 9 s (F 1 s, B 2 s), one column per second: rank 0 waits for each gradient.
  EXPECT_NE(t.text(9).find("rank 0 |FF..BB.BB|"), std::string::npos) << t.text(9);
  EXPECT_NE(t.text(9).find("rank 1 |.FBBFBB..|"), std::string::npos) << t.text(9);
  EXPECT_NE(t.svg().find("<svg"), std::string::npos);
  EXPECT_NE(t.chrome_trace().find("\"name\": \"B1\""), std::string::npos);
}

}  // namespace
}  // namespace infini::parallel::test::pipeline_schedule_test

namespace infini::parallel::test::pipeline_schedule_test {
namespace {

// What each pipeline rank builds: its virtual stages' blocks (chunk c of rank r is virtual
// stage c p + r), the embedding on rank 0, the head on the rank of the last virtual stage.
TEST(PipelineStageParts, BlocksEmbeddingAndHead) {
  const PipelineShape interleaved{.stages = 2, .virtual_stages = 2, .micro_batches = 4};
  const auto blocks = split_blocks(7, 4);  // 2, 2, 2, 1
  const nn::ModelPart first = stage_part(interleaved, 0, blocks), second = stage_part(interleaved, 1, blocks);
  EXPECT_EQ(first.blocks, (std::vector<std::int64_t>{0, 1, 4, 5}));
  EXPECT_TRUE(first.embed);
  EXPECT_FALSE(first.head);
  EXPECT_EQ(second.blocks, (std::vector<std::int64_t>{2, 3, 6}));
  EXPECT_FALSE(second.embed);
  EXPECT_TRUE(second.head);
  const PipelineShape four{.stages = 4, .virtual_stages = 1, .micro_batches = 4};
  const auto uneven = split_blocks(6, 4, {3, 1, 1, 1});
  EXPECT_EQ(stage_part(four, 0, uneven).str(), "embed, blocks 0-2");
  EXPECT_EQ(stage_part(four, 2, uneven).str(), "blocks 4");
  EXPECT_EQ(stage_part(four, 3, uneven).str(), "blocks 5, head");
  const PipelineShape one{.stages = 1, .virtual_stages = 1, .micro_batches = 1};
  EXPECT_TRUE(stage_part(one, 0, split_blocks(3, 1)).is_whole(3));
  EXPECT_THROW(stage_part(four, 0, split_blocks(7, 3)), Error);  // 3 ranges for 4 virtual stages
}

}  // namespace
}  // namespace infini::parallel::test::pipeline_schedule_test
