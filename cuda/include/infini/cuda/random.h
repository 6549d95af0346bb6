// Plain C++ interface to the CUDA random kernels: the uniform, normal and randint fills and
// multinomial sampling, all over Philox4x32 with the CPU kernels' counters, so a CUDA draw
// equals the CPU's for the same (seed, offset).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "infini/cuda/cuda.h"

namespace infini::cuda {

// The counters a random op consumes: element i uses Philox counter offset + i under `seed`.
struct PhiloxCounters {
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
};

// Fills numel contiguous elements of a floating-point `type` at out (others: CudaError).
void uniform(void* out, ElementType type, std::int64_t numel, double low, double high, PhiloxCounters counters,
             int device);
void normal(void* out, ElementType type, std::int64_t numel, double mean, double std, PhiloxCounters counters,
            int device);
// Any `type`; the values low + (r mod (high - low)) are converted like element copies.
void randint(void* out, ElementType type, std::int64_t numel, std::int64_t low, std::int64_t high,
             PhiloxCounters counters, int device);

// The first row of probabilities a multinomial draw cannot use (order and meaning of
// infini::MultinomialCheck).
struct MultinomialProblem {
  enum class Kind : std::uint8_t { None, NotFiniteOrNegative, ZeroSum, TooFewPositive };
  Kind kind = Kind::None;
  std::int64_t row = 0;
  std::int64_t positive = 0;  // the row's count of positive entries (TooFewPositive)
};

// Device scratch memory of `bytes` bytes, alive until multinomial returns.
using Allocate = std::function<void*(std::size_t bytes)>;

// probs: (rows, categories) contiguous, floating-point `type`; out: (rows, samples) int64
// contiguous. Checks every row (finite, non-negative, positive sum, and without replacement
// at least `samples` positive entries) and returns the first failing one; when all pass,
// fills out with the CPU kernel's draws (with replacement: inverse CDF over the row's
// running double sums; without: the `samples` smallest exponential keys).
MultinomialProblem multinomial(std::int64_t* out, const void* probs, ElementType type, std::int64_t rows,
                               std::int64_t categories, std::int64_t samples, bool replacement,
                               PhiloxCounters counters, const Allocate& allocate, int device);

}  // namespace infini::cuda
