// Fashion-MNIST (and MNIST, same format): 28x28 grayscale images with labels 0..9, read
// from the IDX files in `root`: train-images-idx3-ubyte / train-labels-idx1-ubyte
// (60000 examples) or t10k-* (10000), each plain or with a .gz suffix. Debian's
// dataset-fashion-mnist package installs them in /usr/share/datasets/fashion-mnist.
export module infini.nn:fashion_mnist;
import infini.std;
import infini.autograd;
import :dataset;
import :transforms;

export namespace infini::data {

class FashionMNIST : public Dataset<Example> {
 public:
  // Reads the training or test split. IOError when a file is missing or malformed, when
  // images are not 28x28, the counts differ or a label is above 9.
  explicit FashionMNIST(const std::string& root, bool train = true, Transform transform = {});

  std::int64_t size() const override { return images_.size(0); }
  // (image float32 (1,28,28) in [0, 1] (byte / 255), then transformed; label int64 0-d).
  // IndexError unless 0 <= index < size().
  Example get(std::int64_t index) const override;

  const Tensor& images() const { return images_; }  // uint8 (N,28,28)
  const Tensor& labels() const { return labels_; }  // int64 (N)

 private:
  Tensor images_, labels_;
  Transform transform_;
};

}  // namespace infini::data
