// The flight recorder: what it keeps of each operation and the lines it writes.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "comm_test_util.h"

import infini.parallel;

namespace infini::parallel::test::flight_recorder_test {
namespace {

TEST(FlightRecorder, KeepsEachOperation) {
  auto pg = world();
  Tensor t = zeros({3, 2}, TensorOptions{.dtype = kBFloat16});
  pg->all_reduce(t, {.op = ReduceOp::Max}).wait();
  Work pending = pg->broadcast(t, 0);
  const auto records = FlightRecorder::instance().snapshot();
  ASSERT_GE(records.size(), 2u);
  const OpRecord& reduce = records[records.size() - 2];
  const OpRecord& bcast = records.back();
  EXPECT_EQ(std::string(reduce.op), "all_reduce");
  EXPECT_EQ(std::string(reduce.group), "world");
  EXPECT_EQ(std::string(reduce.peers), "all, max");
  EXPECT_EQ(std::string(reduce.tensor), "bfloat16[3, 2]");
  EXPECT_EQ(reduce.bytes, 12);
  EXPECT_EQ(reduce.state, OpState::Completed);
  EXPECT_GE(reduce.end_ns, reduce.start_ns);
  EXPECT_EQ(std::string(bcast.op), "broadcast");
  EXPECT_EQ(bcast.seq, reduce.seq + 1);
  pending.wait();
  EXPECT_EQ(FlightRecorder::instance().snapshot().back().state, OpState::Completed);
}

TEST(FlightRecorder, WritesOneLinePerOperation) {
  auto pg = world();
  Tensor t = ones({5}, TensorOptions{.dtype = kInt64});
  pg->all_reduce(t).wait();
  char path[] = "/tmp/infini_recorder_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  FlightRecorder::instance().write_to(fd, "test");
  ::close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path);
  const std::string dump = text.str();
  EXPECT_NE(dump.find(concat("[infini flight recorder] rank ", pg->rank(), " of ", pg->size())), std::string::npos)
      << dump;
  const auto last = FlightRecorder::instance().snapshot().back();
  const std::string line = concat("  rank ", pg->rank(), " all_reduce #", last.seq,
                                  " group=world peers=all, sum tensor=int64[5] bytes=40 state=completed start=+");
  EXPECT_NE(dump.find(line), std::string::npos) << dump;
}

}  // namespace
}  // namespace infini::parallel::test::flight_recorder_test
