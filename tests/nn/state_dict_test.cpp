// StateDict is an ordered map of names to tensors.
#include <gtest/gtest.h>

import infini.nn;

namespace infini::state_dict_test {
namespace {

TEST(StateDict, IsSortedByName) {
  StateDict state{{"b.weight", zeros({2})}, {"a.step", scalar_tensor(3)}};
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state.begin()->first, "a.step");
  EXPECT_EQ(state.begin()->second.item().to<std::int64_t>(), 3);
}

}  // namespace
}  // namespace infini::state_dict_test
