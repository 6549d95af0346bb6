// The two Fashion-MNIST models of the mnist sample.
#pragma once

#include <string>

import infini.nn;

namespace mnist {

// Needle's MLPResNet: Linear(784, hidden) -> ReLU -> num_blocks x ResidualBlock(hidden,
// hidden / 2) -> Linear(hidden, 10), where ResidualBlock(dim, h) is
// ReLU(x + BN(Linear(h, dim)(Dropout(ReLU(BN(Linear(dim, h)(x))))))). Input (N, 784).
infini::nn::Sequential mlp_resnet(std::int64_t hidden = 100, std::int64_t num_blocks = 3, double drop_prob = 0.1);

// A small conv net: 2 x [Conv 3x3 -> BatchNorm2d -> ReLU -> MaxPool 2] (32 and 64 channels),
// then Linear(64*7*7, 128) -> ReLU -> Dropout(0.25) -> Linear(128, 10). Input (N, 1, 28, 28).
infini::nn::Sequential cnn();

// "mlp_resnet" or "cnn"; Error otherwise.
infini::nn::Sequential make_model(const std::string& name);

}  // namespace mnist
