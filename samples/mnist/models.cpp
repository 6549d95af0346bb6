#include "models.h"

namespace mnist {

using namespace infini::nn;

namespace {

Sequential residual_block(std::int64_t dim, std::int64_t hidden, double drop_prob) {
  Sequential inner(Linear(dim, hidden), BatchNorm1d(hidden), ReLU(), Dropout(drop_prob), Linear(hidden, dim),
                   BatchNorm1d(dim));
  return Sequential(Residual(inner), ReLU());
}

}  // namespace

Sequential mlp_resnet(std::int64_t hidden, std::int64_t num_blocks, double drop_prob) {
  Sequential net(Flatten(), Linear(784, hidden), ReLU());
  for (std::int64_t i = 0; i < num_blocks; ++i) net->push_back(residual_block(hidden, hidden / 2, drop_prob).ptr());
  net->push_back(Linear(hidden, 10).ptr());
  return net;
}

Sequential cnn() {
  return Sequential(Conv2d(1, 32, 3, {.padding = 1}), BatchNorm2d(32), ReLU(), MaxPool2d(2),
                    Conv2d(32, 64, 3, {.padding = 1}), BatchNorm2d(64), ReLU(), MaxPool2d(2), Flatten(),
                    Linear(64 * 7 * 7, 128), ReLU(), Dropout(0.25), Linear(128, 10));
}

Sequential make_model(const std::string& name) {
  if (name == "mlp_resnet") return mlp_resnet();
  if (name == "cnn") return cnn();
  throw infini::Error("mnist", "unknown model \"" + name + "\" (expected mlp_resnet or cnn)");
}

}  // namespace mnist
