// Runs the tiny training run for --steps steps and saves its whole state to --save, after
// loading --load when given. check_resume.cmake runs it as 20 steps, and as 10 steps plus
// 10 more in a new process, and compares the two checkpoints byte for byte. The losses of
// all steps travel in the checkpoint's metadata, so they are compared too.
//   checkpoint_resume --steps 10 --save DIR [--load DIR]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "../tiny_training_run.h"

import infini.nn;

int main(int argc, char** argv) {
  long long steps = -1;
  std::string save, load;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "--steps") steps = std::atoll(argv[i + 1]);
    else if (flag == "--save") save = argv[i + 1];
    else if (flag == "--load") load = argv[i + 1];
  }
  if (steps < 0 || save.empty() || argc % 2 == 0) {
    std::fprintf(stderr, "usage: checkpoint_resume --steps N --save DIR [--load DIR]\n");
    return 2;
  }
  try {
    // A different initialisation when resuming: everything must come from the checkpoint.
    infini::test::TinyTrainingRun run(load.empty() ? 1 : 2);
    if (!load.empty()) infini::io::load_checkpoint(load, run.state());
    std::string& losses = run.state().metadata["losses"];
    for (const double loss : run.train(steps)) {
      char text[32];
      std::snprintf(text, sizeof text, "%a ", loss);  // exact
      losses += text;
    }
    infini::io::save_checkpoint(save, run.state());
    std::printf("step %lld, losses %s\n", static_cast<long long>(run.state().step), losses.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_resume: %s\n", e.what());
    return 1;
  }
  return 0;
}
