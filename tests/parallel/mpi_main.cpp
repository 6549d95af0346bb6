// GoogleTest main for the tests that run under mpirun: every rank runs every test in the
// same order (collectives must match); rank 0 prints the usual report, the other ranks
// print only their failures. The process group is finalized at exit.
#include <gtest/gtest.h>

#include <cstdio>

import infini.parallel;

namespace {

// Prints failed assertions with the rank in front (for ranks other than 0).
class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  const auto world = infini::parallel::init_process_group();
  if (world->rank() != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(world->rank()));
  }
  return RUN_ALL_TESTS();
}
