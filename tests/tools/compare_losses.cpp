// compare_losses EXPECTED.json METRICS.jsonl [TOLERANCE]: exit 0 when the "loss" of every
// step line of the metrics file matches expected.json's "losses" within its "tolerance_abs"
// (or TOLERANCE) and there are as many, else 1 with the first mismatch. Used by the
// trainers' reference tests.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: compare_losses EXPECTED.json METRICS.jsonl [TOLERANCE]\n");
    return 2;
  }
  try {
    const nlohmann::json expected = nlohmann::json::parse(std::ifstream(argv[1]));
    const std::vector<double> want = expected.at("losses").get<std::vector<double>>();
    const double tolerance = argc == 4 ? std::stod(argv[3]) : expected.at("tolerance_abs").get<double>();
    std::vector<double> got;
    std::ifstream metrics(argv[2]);
    for (std::string line; std::getline(metrics, line);) {
      const nlohmann::json object = nlohmann::json::parse(line);
      if (object.contains("loss")) got.push_back(object["loss"].get<double>());
    }
    if (got.size() != want.size()) {
      std::fprintf(stderr, "%zu step losses in %s, expected %zu\n", got.size(), argv[2], want.size());
      return 1;
    }
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double error = std::abs(got[i] - want[i]);
      if (!(error <= tolerance)) {
        std::fprintf(stderr, "step %zu: loss %.7f, expected %.7f (error %.2e > %.2e)\n", i, got[i], want[i], error, tolerance);
        return 1;
      }
      worst = std::max(worst, error);
    }
    std::printf("%zu losses within %.1e (largest error %.2e)\n", want.size(), tolerance, worst);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_losses: %s\n", e.what());
    return 1;
  }
  return 0;
}
