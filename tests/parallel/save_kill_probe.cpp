// A distributed save that loses a rank: save_kill.sh runs
//   mpirun -np 2 save_kill_probe save DIR    both ranks save step 1 (every element of "w" is
//                                            1, of "v" 10), then step 2 (2 and 20) until rank 1
//                                            is SIGKILLed once its shard file is written
//   save_kill_probe check DIR                (one process) DIR still holds step 1, whole and
//                                            exact, next to the files step 2 left behind; a
//                                            new save (step 3) publishes and removes them
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

import infini.parallel;

using namespace infini;
using namespace infini::parallel;

namespace {

// Rank r's half of "w" (8 x 4, rows split) and the replicated "v" (3), at `step`.
std::vector<ShardedTensor> state(int step, int rank, int ranks) {
  const nn::ShardSpec rows{0, {8}};
  return {tensor_parallel_shard("w", full({8 / ranks, 4}, step), rows, rank, ranks),
          replicated("v", full({3}, 10.0 * step, {.dtype = kFloat64}))};
}

bool same(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && all(eq(a, b)).item<bool>(); }

int check(const std::filesystem::path& dir) {
  int stale = 0;  // step 2's files, written but never published
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    stale += entry.path().filename().string().starts_with("shard-2-") ? 1 : 0;
  const DistributedCheckpoint checkpoint(dir);
  const std::vector<Tensor> values = checkpoint.read({replicated("w", empty({8, 4})),
                                                      replicated("v", empty({3}, {.dtype = kFloat64}))});
  const bool whole = checkpoint.step() == 1 && same(values[0], full({8, 4}, 1.0)) &&
                     same(values[1], full({3}, 10.0, {.dtype = kFloat64}));
  save_distributed_checkpoint(dir, 3, state(3, 0, 1), nullptr);
  int left = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    left += entry.path().filename().string().starts_with("shard-3-") ? 0 : entry.path().filename() == "checkpoint.json" ? 0 : 1;
  std::printf("step %lld, %s; %d files of step 2 were left behind; after step 3, %d other files\n",
              static_cast<long long>(checkpoint.step()), whole ? "every value as saved" : "VALUES DIFFER", stale, left);
  return whole && stale > 0 && left == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::string_view(argv[1]) != "save" && std::string_view(argv[1]) != "check")) {
    std::fprintf(stderr, "usage: save_kill_probe save|check DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[2];
  if (std::string_view(argv[1]) == "check") return check(dir);
  auto pg = init_process_group();
  save_distributed_checkpoint(dir, 1, state(1, pg->rank(), pg->size()), pg);
  DistributedSaveOptions options;
  if (pg->rank() == 1) options.after_shard_written = [] { ::raise(SIGKILL); };
  save_distributed_checkpoint(dir, 2, state(2, pg->rank(), pg->size()), pg, options);
  std::printf("rank %d: step 2 was published without rank 1\n", pg->rank());
  return 0;
}
