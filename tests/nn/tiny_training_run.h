// A tiny training run that has every kind of state a checkpoint must carry: parameters and
// BatchNorm buffers, dropout drawing from the default generator, AdamW moments, a cosine LR
// schedule, a GradScaler whose scale grows, and a shuffled two-worker loader whose epochs
// (7 batches: 40 examples, batch 6) do not line up with checkpoint steps.
// Used by checkpoint_test.cpp (in one process) and checkpoint_resume.cpp (across processes).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

import infini.nn;

namespace infini::test {

class TinyTrainingRun {
 public:
  // `init_seed` seeds the model's initialisation only; the data is always the same.
  explicit TinyTrainingRun(std::uint64_t init_seed)
      : model_((manual_seed(init_seed),
                nn::Sequential(nn::Linear(4, 16), nn::BatchNorm1d(16), nn::ReLU(), nn::Dropout(0.25), nn::Linear(16, 3)))),
        optimizer_(model_->parameters(), optim::AdamWOptions{.lr = 0.05, .weight_decay = 0.1}),
        scheduler_(optimizer_, 25, 0.001),
        scaler_({.init_scale = 256.0, .growth_interval = 3}),
        loader_(make_dataset(), {.batch_size = 6, .shuffle = true, .num_workers = 2, .seed = 11}) {
    state_.add("model", *model_)
        .add("optimizer", optimizer_)
        .add("scheduler", scheduler_)
        .add("scaler", scaler_)
        .add("loader", loader_)
        .add_generator("rng", default_generator());
  }

  // Runs `steps` optimizer steps from where the run stands; returns each step's loss.
  std::vector<double> train(std::int64_t steps) {
    std::vector<double> losses;
    model_->train();
    while (static_cast<std::int64_t>(losses.size()) < steps) {
      for (data::Example& batch : loader_) {
        const Tensor loss = cross_entropy(model_(batch.data), batch.target);
        optimizer_.zero_grad();
        scaler_.scale(loss).backward();
        scaler_.step(optimizer_);
        scaler_.update();
        scheduler_.step();
        losses.push_back(loss.item().to<double>());
        ++state_.step;
        if (static_cast<std::int64_t>(losses.size()) == steps) break;
      }
    }
    return losses;
  }

  io::TrainingState& state() { return state_; }
  nn::Sequential& model() { return model_; }

 private:
  // 40 examples of 4 features in 3 classes (the class of x is argmax of x[0:3] + noise).
  static std::shared_ptr<data::TensorDataset> make_dataset() {
    Generator data_rng(2024);
    Tensor x = randn({40, 4}, {}, &data_rng);
    Tensor y = argmax(add(x.slice(1, 0, 3), mul(randn({40, 3}, {}, &data_rng), 0.3)), 1);
    return std::make_shared<data::TensorDataset>(x, y);
  }

  nn::Sequential model_;
  optim::AdamW optimizer_;
  optim::CosineAnnealingLR scheduler_;
  optim::GradScaler scaler_;
  data::DataLoader<> loader_;
  io::TrainingState state_;
};

}  // namespace infini::test
