// Internal: row sums in float64 over 8 interleaved partial sums, added in a fixed order at
// the end: independent chains the compiler can vectorize, the same bits on every run
// (layer norm's rows, the cross-entropy's sums of exponentials).
#pragma once

#include <cstdint>

namespace infini::cpu {

inline constexpr int kPartials = 8;

inline double total(const double (&part)[kPartials]) {
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

// part[j % kPartials] += term(j) for j < n, in blocks of kPartials (j ascending in each part).
template <class F>
void add_terms(double (&part)[kPartials], std::int64_t n, F&& term) {
  std::int64_t j = 0;
  for (; j + kPartials <= n; j += kPartials)
    for (int k = 0; k < kPartials; ++k) part[k] += term(j + k);
  for (; j < n; ++j) part[j % kPartials] += term(j);
}

}  // namespace infini::cpu
