// A downstream program, built against the installed package (find_package(Infini)) the way a
// user's project is: imports infini.nn and infini.parallel, trains a small model built from nn
// layers with AdamW, and all-reduces across the ranks mpirun started. Exit 0 only when every
// number is as expected; run alone (world of one) and under `mpirun -np 2`.
#include <cmath>
#include <cstdio>
#include <vector>

import infini.nn;
import infini.parallel;

namespace {

using namespace infini;

int failures = 0;

void check(bool ok, const char* what, double got, double expected) {
  std::printf("%s: %s (got %.6g, expected %.6g)\n", ok ? "ok" : "FAILED", what, got, expected);
  if (!ok) ++failures;
}

// Regression of y = x w* + 0.5 (x (64, 4), w* = [1, -2, 3, -4]) with Linear -> Tanh -> Linear,
// 50 AdamW steps; the same seed on every rank, so every rank trains the same model.
void train_small_model() {
  manual_seed(7);
  const Tensor x = randn({64, 4});
  const Tensor w = from_vector(std::vector<float>{1, -2, 3, -4}, {4, 1});
  const Tensor y = matmul(x, w) + 0.5;
  nn::Sequential model(nn::Linear(4, 16), nn::Tanh(), nn::Linear(16, 1));
  optim::AdamW optimizer(model->parameters(), {.lr = 0.02, .weight_decay = 0.01});
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    optimizer.zero_grad();
    const Tensor loss = mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  // The targets' variance is 30 (1 + 4 + 9 + 16); 50 steps take the loss below a tenth of the first.
  check(std::isfinite(last) && last < 0.1 * first, "AdamW: loss after 50 steps < 0.1 x the first", last, 0.1 * first);
}

// Every rank contributes rank + 1 in each of 5 elements: the sum is n (n + 1) / 2 everywhere.
void all_reduce_ranks() {
  const auto world = parallel::init_process_group();
  const int n = world->size();
  Tensor t = full({5}, world->rank() + 1.0, {.dtype = kFloat64});
  world->all_reduce(t).wait();
  const double expected = n * (n + 1) / 2.0;
  double worst = 0;
  for (int i = 0; i < 5; ++i) worst = std::fmax(worst, std::fabs(t.data_ptr<double>()[i] - expected));
  std::printf("rank %d of %d\n", world->rank(), n);
  check(worst == 0, "all_reduce(sum) of rank + 1 over the world", t.data_ptr<double>()[0], expected);
}

}  // namespace

int main() {
  train_small_model();
  all_reduce_ranks();
  return failures == 0 ? 0 : 1;
}
