module;
#include <cstddef>
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<Tensor>& params,
                                                     const std::vector<std::size_t>& order,
                                                     const BucketOptions& options) {
  if (options.first_bucket_bytes <= 0 || options.bucket_bytes <= 0)
    throw Error("assign_buckets", concat("expected positive bucket caps, got first_bucket_bytes ",
                                         options.first_bucket_bytes, " and bucket_bytes ", options.bucket_bytes));
  std::vector<bool> seen(params.size(), false);
  if (order.size() != params.size())
    throw Error("assign_buckets", concat("expected an order of all ", params.size(), " parameters, got ", order.size()));
  for (std::size_t i : order) {
    if (i >= params.size() || seen[i])
      throw Error("assign_buckets", concat("order is not a permutation of 0..", params.size() - 1, " (entry ", i, ")"));
    seen[i] = true;
  }

  struct Open {
    std::vector<std::size_t> params;
    std::int64_t bytes = 0;
    bool first = true;  // the kind's first bucket: the small cap
  };
  // (dtype, device) -> its open bucket; closed buckets keep their first parameter's position.
  std::map<std::pair<int, std::pair<int, int>>, Open> open;
  std::vector<std::pair<std::size_t, std::vector<std::size_t>>> closed;  // (position of first, bucket)
  std::vector<std::size_t> position(params.size());
  for (std::size_t k = 0; k < order.size(); ++k) position[order[k]] = k;

  for (std::size_t i : order) {
    const Tensor& p = params[i];
    const auto key = std::make_pair(static_cast<int>(p.dtype()),
                                    std::make_pair(static_cast<int>(p.device().type), p.device().index));
    Open& bucket = open[key];
    bucket.params.push_back(i);
    bucket.bytes += p.numel() * static_cast<std::int64_t>(itemsize(p.dtype()));
    if (bucket.bytes >= (bucket.first ? options.first_bucket_bytes : options.bucket_bytes)) {
      closed.emplace_back(position[bucket.params.front()], std::move(bucket.params));
      bucket = Open{.params = {}, .bytes = 0, .first = false};
    }
  }
  for (auto& [key, bucket] : open)
    if (!bucket.params.empty()) closed.emplace_back(position[bucket.params.front()], std::move(bucket.params));
  std::sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::vector<std::size_t>> buckets;
  for (auto& [first, bucket] : closed) buckets.push_back(std::move(bucket));
  return buckets;
}

std::vector<std::size_t> reverse_order(std::size_t n) {
  std::vector<std::size_t> order(n);
  for (std::size_t k = 0; k < n; ++k) order[k] = n - 1 - k;
  return order;
}

}  // namespace infini::parallel
