// Trains a classifier on Fashion-MNIST and reports loss and accuracy per epoch.
//   build/release/bin/mnist --data /usr/share/datasets/fashion-mnist --model cnn --epochs 5 \
//       --batch_size 128 --lr 2e-3 --optimizer adam --lr_schedule cosine --seed 0 --metrics_out cnn.jsonl
// Under mpirun every rank is a data-parallel replica (DistributedDataParallel) that trains on
// its share of each epoch (DistributedSampler, --batch_size images per rank); rank 0
// evaluates, prints and writes the metrics.
// Each epoch prints one line and appends one JSON object to --metrics_out:
//   {"epoch": 1, "train_loss": ..., "train_acc": ..., "test_loss": ..., "test_acc": ..., "seconds": ...}
#include <CLI/CLI.hpp>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models.h"

import infini.parallel;

using namespace infini;

namespace {

struct Flags {
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string model = "mlp_resnet";
  std::int64_t epochs = 5;
  std::int64_t batch_size = 128;
  double lr = 2e-3;
  double weight_decay = 0;
  std::string optimizer = "adam";
  std::string lr_schedule = "cosine";
  std::uint64_t seed = 0;
  std::string metrics_out;
  int threads = 0;
  std::int64_t workers = 1;
  std::int64_t train_examples = 0;
};

std::unique_ptr<optim::Optimizer> make_optimizer(const Flags& f, std::vector<Tensor> params) {
  if (f.optimizer == "sgd")
    return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = f.lr, .momentum = 0.9, .weight_decay = f.weight_decay});
  if (f.optimizer == "adam")
    return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = f.lr, .weight_decay = f.weight_decay});
  if (f.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = f.lr, .weight_decay = f.weight_decay});
  throw Error("mnist", "unknown optimizer \"" + f.optimizer + "\" (expected sgd, adam or adamw)");
}

// Fashion-MNIST's pixel mean and standard deviation (of bytes / 255, training split).
constexpr double kMean = 0.2860, kStd = 0.3530;

struct EpochStats {
  double loss = 0, acc = 0;
};

// One pass over `loader`: with an optimizer, a training epoch; without, an evaluation.
// With `scheduler`, it steps after every optimizer step. With `world`, the statistics are
// over every rank's examples.
EpochStats run_epoch(nn::Sequential& model, data::DataLoader<>& loader, optim::Optimizer* optimizer,
                     optim::LRScheduler* scheduler, parallel::ProcessGroup* world = nullptr) {
  double loss_sum = 0;
  std::int64_t correct = 0, seen = 0;
  for (data::Example& batch : loader) {
    const Tensor x = div(sub(batch.data, kMean), kStd);
    const Tensor logits = model(x);
    const Tensor loss = cross_entropy(logits, batch.target);
    if (optimizer) {
      optimizer->zero_grad();
      loss.backward();
      optimizer->step();
      if (scheduler) scheduler->step();
    }
    const std::int64_t n = batch.target.size(0);
    loss_sum += loss.item().to<double>() * static_cast<double>(n);
    correct += sum(eq(argmax(logits, 1), batch.target)).item().to<std::int64_t>();
    seen += n;
  }
  if (world) {
    Tensor totals = from_vector(std::vector<double>{loss_sum, static_cast<double>(correct), static_cast<double>(seen)}, {3});
    world->all_reduce(totals).wait();
    const double* t = totals.data_ptr<double>();
    return {t[0] / t[2], t[1] / t[2]};
  }
  return {loss_sum / static_cast<double>(seen), static_cast<double>(correct) / static_cast<double>(seen)};
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"Trains an MLPResNet or a small CNN on Fashion-MNIST."};
  app.add_option("--data", f.data, "directory with the four IDX files (plain or .gz)");
  app.add_option("--model", f.model, "mlp_resnet or cnn")->check(CLI::IsMember({"mlp_resnet", "cnn"}));
  app.add_option("--epochs", f.epochs)->check(CLI::PositiveNumber);
  app.add_option("--batch_size", f.batch_size)->check(CLI::PositiveNumber);
  app.add_option("--lr", f.lr);
  app.add_option("--weight_decay", f.weight_decay);
  app.add_option("--optimizer", f.optimizer, "sgd (momentum 0.9), adam or adamw")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  app.add_option("--lr_schedule", f.lr_schedule, "constant, or cosine: from lr down to 0 over all steps")
      ->check(CLI::IsMember({"constant", "cosine"}));
  app.add_option("--seed", f.seed);
  app.add_option("--metrics_out", f.metrics_out, "JSON lines file, one object per epoch");
  app.add_option("--threads", f.threads, "OpenMP threads (0: the default)");
  app.add_option("--workers", f.workers, "background threads building batches");
  app.add_option("--train_examples", f.train_examples, "train on the first N training images only (0: all)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  try {
    if (f.threads > 0) omp_set_num_threads(f.threads);
    manual_seed(f.seed);
    std::shared_ptr<const data::Dataset<>> train_set = std::make_shared<data::FashionMNIST>(f.data, true);
    if (f.train_examples > 0 && f.train_examples < train_set->size()) {
      std::vector<std::int64_t> first(static_cast<std::size_t>(f.train_examples));
      std::iota(first.begin(), first.end(), std::int64_t{0});
      train_set = std::make_shared<data::Subset<>>(train_set, std::move(first));
    }
    auto test_set = std::make_shared<data::FashionMNIST>(f.data, false);
    // Under mpirun: rank r trains on its DistributedSampler share of each epoch.
    std::shared_ptr<parallel::ProcessGroup> world;
    if (parallel::launched_by_mpirun()) world = parallel::init_process_group();
    const bool main_rank = !world || world->rank() == 0;
    std::shared_ptr<const data::Sampler> sampler;
    if (world)
      sampler = std::make_shared<data::DistributedSampler>(train_set->size(), world->size(), world->rank(), true, f.seed);
    data::DataLoader<> train_loader(train_set, {.batch_size = f.batch_size, .shuffle = !sampler,
                                                .num_workers = f.workers, .seed = f.seed, .sampler = sampler});
    data::DataLoader<> test_loader(test_set, {.batch_size = 1000, .num_workers = f.workers, .seed = f.seed});

    nn::Sequential model = mnist::make_model(f.model);
    std::optional<parallel::DistributedDataParallel> ddp;  // rank 0's weights, averaged gradients
    if (world) ddp.emplace(model.ptr(), world);
    auto optimizer = make_optimizer(f, model->parameters());
    std::unique_ptr<optim::LRScheduler> scheduler;
    if (f.lr_schedule == "cosine")
      scheduler = std::make_unique<optim::CosineAnnealingLR>(*optimizer, f.epochs * train_loader.size());
    std::ofstream metrics;
    if (main_rank && !f.metrics_out.empty()) {
      metrics.open(f.metrics_out);
      if (!metrics) throw IOError("mnist", "cannot open " + f.metrics_out);
    }
    if (main_rank)
      std::printf("%s on Fashion-MNIST: %zu train / %zu test images, %zu parameters, %d ranks of %d threads\n", f.model.c_str(),
                static_cast<std::size_t>(train_set->size()), static_cast<std::size_t>(test_set->size()),
                static_cast<std::size_t>([&] { std::int64_t n = 0; for (const Tensor& p : model->parameters()) n += p.numel(); return n; }()),
                world ? world->size() : 1, omp_get_max_threads());
    for (std::int64_t epoch = 1; epoch <= f.epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      model->train();
      const EpochStats train = run_epoch(model, train_loader, optimizer.get(), scheduler.get(), world.get());
      if (!main_rank) continue;  // rank 0 evaluates and reports
      model->eval();
      EpochStats test;
      {
        NoGradGuard no_grad;
        test = run_epoch(model, test_loader, nullptr, nullptr);
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("epoch %lld | train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1f s\n",
                  static_cast<long long>(epoch), train.loss, train.acc, test.loss, test.acc, seconds);
      std::fflush(stdout);
      if (metrics.is_open()) {
        char line[256];
        std::snprintf(line, sizeof line,
                      "{\"epoch\": %lld, \"train_loss\": %.6f, \"train_acc\": %.6f, \"test_loss\": %.6f, "
                      "\"test_acc\": %.6f, \"seconds\": %.3f}\n",
                      static_cast<long long>(epoch), train.loss, train.acc, test.loss, test.acc, seconds);
        metrics << line << std::flush;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mnist: %s\n", e.what());
    if (parallel::is_initialized()) parallel::abort_job(1);  // other ranks may wait in a collective
    return 1;
  }
  return 0;
}
