// libFuzzer target: the trainers' command line (samples/common: add_train_flags, then
// prepare_run's checks). The input is split at NUL bytes into at most 24 arguments. A
// CLI::ParseError or an infini::Error is the expected answer to a bad command line; any other
// exception, a crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lm_trainer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args = {"gpt2"};
  std::string arg;
  for (std::size_t i = 0; i < size && args.size() < 24; ++i) {
    if (data[i] == 0) {
      args.push_back(std::move(arg));
      arg.clear();
    } else {
      arg += static_cast<char>(data[i]);
    }
  }
  if (!arg.empty() && args.size() < 24) args.push_back(std::move(arg));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());

  CLI::App app("fuzz");
  samples::TrainFlags flags;
  samples::add_train_flags(app, flags);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
    samples::prepare_run(flags);
  } catch (const CLI::Error&) {
  } catch (const infini::Error&) {
  }
  return 0;
}
