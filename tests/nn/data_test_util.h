// Shared by the data tests: typed error expectations.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

import infini.nn;

namespace infini::data::test {

// Expects call() to throw an E (or subclass) from `op` whose message contains every part.
template <class E, class Call>
void expect_error(Call&& call, const std::string& op, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "expected an error from " << op;
  } catch (const Error& e) {
    EXPECT_NE(dynamic_cast<const E*>(&e), nullptr) << "wrong error type: " << e.what();
    EXPECT_EQ(e.op(), op) << e.what();
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "'" << part << "' not in: " << e.what();
  }
}

template <class E, class Call>
void expect_error(Call&& call, const std::string& op, const char* part) {
  expect_error<E>(std::forward<Call>(call), op, std::vector<std::string>{part});
}

}  // namespace infini::data::test
