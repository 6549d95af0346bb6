// Helpers for the process-group tests: tensors from per-element formulas and exact
// comparisons against closed forms (small integers, exact in every dtype).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

import infini.parallel;

namespace infini::parallel::test {

inline const std::vector<DataType> kNumericTypes = {kUInt8, kInt8,     kInt16,   kInt32,  kInt64,
                                                    kFloat16, kBFloat16, kFloat32, kFloat64};
inline const std::vector<std::int64_t> kSizes = {0, 1, 37};

// A 1-d tensor of `n` elements, element i = value(i), in `dtype`.
inline Tensor make(std::int64_t n, DataType dtype, const std::function<double(std::int64_t)>& value) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = value(i);
  return from_vector(v, {n}).to(dtype);
}

// Asserts t (any dtype, any shape) equals expected(i) element by element in row-major order.
inline void expect_values(const Tensor& t, const std::function<double(std::int64_t)>& expected,
                          const std::string& what) {
  const Tensor flat = t.to(kFloat64).contiguous().reshape({-1});
  const double* data = flat.data_ptr<double>();
  for (std::int64_t i = 0; i < flat.numel(); ++i)
    ASSERT_EQ(data[i], expected(i)) << what << ", element " << i << ", dtype " << t.dtype();
}

// Deterministic float64 values that differ per (seed, element).
inline Tensor pattern(const Shape& shape, double seed) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = std::sin(seed * 1.7 + static_cast<double>(i) * 0.37);
  return from_vector(v, shape);
}

// Asserts |actual - expected| <= tolerance element by element (any floating dtypes, same shape).
inline void expect_near(const Tensor& actual, const Tensor& expected, double tolerance, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << ": undefined";
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const Tensor a = actual.to(kFloat64).contiguous(), e = expected.to(kFloat64).contiguous();
  for (std::int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.data_ptr<double>()[i], e.data_ptr<double>()[i], tolerance) << what << ", element " << i;
}

// Rank 0's process id (a name no other run uses at the same time).
inline std::int64_t getpid_of_rank0(ProcessGroup& group) {
  Tensor pid = full({1}, group.rank() == 0 ? static_cast<double>(::getpid()) : 0.0, {.dtype = kInt64});
  group.broadcast(pid, 0).wait();
  return pid.item<std::int64_t>();
}

// A new empty directory every rank of `group` sees (rank 0 makes it under the temporary
// directory), or nothing on every rank when they do not share a filesystem (the multihost test's
// fake hosts). Collective.
inline std::optional<std::filesystem::path> shared_directory(ProcessGroup& group, const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / concat("infini_", name, "_", getpid_of_rank0(group));
  if (group.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "marker") << "shared";
  }
  group.barrier().wait();
  Tensor seen = full({1}, std::filesystem::exists(dir / "marker") ? 1 : 0, {.dtype = kInt64});
  group.all_reduce(seen, {.op = ReduceOp::Min}).wait();
  if (seen.item<std::int64_t>() == 0) return std::nullopt;
  group.barrier().wait();  // every rank looked before the marker goes
  if (group.rank() == 0) std::filesystem::remove(dir / "marker");
  group.barrier().wait();
  return dir;
}

}  // namespace infini::parallel::test
