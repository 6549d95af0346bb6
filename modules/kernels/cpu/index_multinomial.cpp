// CPU multinomial sampling over Philox4x32 (see MultinomialKernel for the counters used),
// after checking every row (one pass, in the probabilities' own dtype read as double).
// With replacement: inverse-CDF lookup of one 53-bit uniform per sample. Without: the
// exponential-race trick (category c wins with key E_c / p_c, E_c ~ Exp(1); the
// num_samples smallest keys, in increasing order, are a draw without replacement).
module;
#include <cmath>
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

// Uniform in [0, 1) from the 53 high bits of the first two words.
double uniform53(const std::array<std::uint32_t, 4>& w) {
  return static_cast<double>(((std::uint64_t{w[0]} << 32) | w[1]) >> 11) * 0x1p-53;
}

// One row with replacement: out[s] = the first category whose cumulative weight exceeds
// u_s * total.
template <class T>
void sample_with_replacement(const T* p, std::int64_t categories, std::int64_t* out, std::int64_t samples,
                             std::uint64_t seed, std::uint64_t counter) {
  std::vector<double> cdf(static_cast<std::size_t>(categories));
  double total = 0;
  for (std::int64_t c = 0; c < categories; ++c) cdf[c] = total += static_cast<double>(p[c]);
  // The last category with weight: u * total may round up to total.
  std::int64_t last = categories - 1;
  while (last > 0 && static_cast<double>(p[last]) == 0) --last;
  for (std::int64_t s = 0; s < samples; ++s) {
    const double target = uniform53(philox4x32(seed, counter + static_cast<std::uint64_t>(s))) * total;
    const auto it = std::upper_bound(cdf.begin(), cdf.end(), target);
    out[s] = std::min<std::int64_t>(it - cdf.begin(), last);
  }
}

template <class T>
void sample_without_replacement(const T* p, std::int64_t categories, std::int64_t* out, std::int64_t samples,
                                std::uint64_t seed, std::uint64_t counter) {
  std::vector<std::pair<double, std::int64_t>> keys(static_cast<std::size_t>(categories));
  for (std::int64_t c = 0; c < categories; ++c) {
    const double w = static_cast<double>(p[c]);
    const double u = 1.0 - uniform53(philox4x32(seed, counter + static_cast<std::uint64_t>(c)));  // (0, 1]
    keys[c] = {w > 0 ? -std::log(u) / w : std::numeric_limits<double>::infinity(), c};
  }
  std::partial_sort(keys.begin(), keys.begin() + samples, keys.end());
  for (std::int64_t s = 0; s < samples; ++s) out[s] = keys[s].second;
}

// Why row p cannot be drawn from, if it cannot.
template <class T>
MultinomialCheck check_row(const T* p, std::int64_t categories, std::int64_t needed) {
  using Problem = MultinomialCheck::Problem;
  double total = 0;
  std::int64_t positive = 0;
  for (std::int64_t c = 0; c < categories; ++c) {
    const double w = static_cast<double>(p[c]);
    if (!std::isfinite(w) || w < 0) return {Problem::NotFiniteOrNegative};
    total += w;
    positive += w > 0;
  }
  if (total == 0) return {Problem::ZeroSum};
  if (positive < needed) return {Problem::TooFewPositive, 0, positive};
  return {};
}

MultinomialCheck multinomial_cpu(const Tensor& out, const Tensor& probs, bool replacement, PhiloxState state) {
  return dispatch(probs.dtype(), [&]<class T>() -> MultinomialCheck {
    if constexpr (!is_float_compute<T>) {
      throw DTypeError("multinomial", concat("expected floating-point probabilities, got ", probs.dtype()));
    } else {
      const std::int64_t rows = probs.shape()[0], categories = probs.shape()[1], samples = out.shape()[1];
      const T* p = static_cast<const T*>(probs.data_ptr());
      std::int64_t* o = out.data_ptr<std::int64_t>();
      const bool parallel = rows > 1 && rows * categories >= kParallelGrain;
      // Every row is checked before any is drawn from.
      std::vector<MultinomialCheck> checks(static_cast<std::size_t>(rows));
#pragma omp parallel for schedule(static) if (parallel)
      for (std::int64_t r = 0; r < rows; ++r) checks[r] = check_row(p + r * categories, categories, replacement ? 1 : samples);
      for (std::int64_t r = 0; r < rows; ++r)
        if (checks[r].problem != MultinomialCheck::Problem::None) {
          checks[r].row = r;
          return checks[r];
        }
      const std::int64_t per_row = replacement ? samples : categories;  // counters each row uses
#pragma omp parallel for schedule(static) if (parallel)
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::uint64_t counter = state.offset + static_cast<std::uint64_t>(r * per_row);
        if (replacement)
          sample_with_replacement(p + r * categories, categories, o + r * samples, samples, state.seed, counter);
        else
          sample_without_replacement(p + r * categories, categories, o + r * samples, samples, state.seed, counter);
      }
      return {};
    }
  });
}

const bool registered = [] {
  KernelTable<MultinomialKernel>::set(DeviceType::CPU, &multinomial_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
