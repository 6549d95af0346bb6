// FashionMNIST (see fashion_mnist.cppm).
module;
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::data {
namespace {

// root/name, or root/name.gz when only that exists.
std::string find_file(const std::string& root, const std::string& name) {
  const std::filesystem::path plain = std::filesystem::path(root) / name;
  std::filesystem::path gz = plain;
  gz += ".gz";
  if (std::filesystem::exists(plain)) return plain.string();
  if (std::filesystem::exists(gz)) return gz.string();
  throw IOError("FashionMNIST", concat("neither ", plain.string(), " nor ", gz.string(), " exists"));
}

}  // namespace

FashionMNIST::FashionMNIST(const std::string& root, bool train, Transform transform) : transform_(std::move(transform)) {
  const std::string split = train ? "train" : "t10k";
  const std::string images_path = find_file(root, split + "-images-idx3-ubyte");
  const std::string labels_path = find_file(root, split + "-labels-idx1-ubyte");
  images_ = read_idx_images(images_path);
  labels_ = read_idx_labels(labels_path);
  if (images_.size(1) != 28 || images_.size(2) != 28)
    throw IOError("FashionMNIST", concat(images_path, ": expected 28x28 images, got ", images_.shape()));
  if (labels_.size(0) != images_.size(0))
    throw IOError("FashionMNIST", concat(labels_path, " holds ", labels_.size(0), " labels for ", images_.size(0),
                                         " images in ", images_path));
  const std::int64_t* labels = labels_.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < labels_.size(0); ++i)
    if (labels[i] > 9) throw IOError("FashionMNIST", concat(labels_path, ": label ", labels[i], " of example ", i, " is above 9"));
}

Example FashionMNIST::get(std::int64_t index) const {
  if (index < 0 || index >= size())
    throw IndexError("FashionMNIST.get", concat("index ", index, " is out of range for ", size(), " examples"));
  Tensor image = (images_.select(0, index).to(kFloat32) / 255.0).unsqueeze(0);
  if (transform_) image = transform_(image);
  return {image, labels_.select(0, index)};
}

}  // namespace infini::data
