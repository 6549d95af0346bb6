// The inverse of an index map, shared by the CPU and CUDA scatter_add_dim kernels: for
// index (m entries, each in [0, n)), sources[starts[i] .. starts[i + 1]) are the j with
// index[j] == i, ascending (a CSR list, so each destination sums its sources in order).
#pragma once

#include <cstdint>
#include <vector>

namespace infini::kernels {

struct DestinationGroups {
  std::vector<std::int64_t> starts;   // n + 1 offsets into sources
  std::vector<std::int64_t> sources;  // m positions, grouped by destination
};

inline DestinationGroups group_by_destination(const std::vector<std::int64_t>& index, std::int64_t n) {
  DestinationGroups g{std::vector<std::int64_t>(static_cast<std::size_t>(n + 1), 0),
                      std::vector<std::int64_t>(index.size())};
  for (std::int64_t i : index) ++g.starts[i + 1];
  for (std::int64_t i = 0; i < n; ++i) g.starts[i + 1] += g.starts[i];
  std::vector<std::int64_t> cursor(g.starts.begin(), g.starts.end() - 1);
  for (std::size_t j = 0; j < index.size(); ++j) g.sources[cursor[index[j]]++] = static_cast<std::int64_t>(j);
  return g;
}

}  // namespace infini::kernels
