// Image transforms (torchvision.transforms semantics) on tensors (..., C, H, W): one image
// (C,H,W) or a batch (N,C,H,W). Like torchvision, a random transform makes one random
// draw per call, shared by all images of a batch; apply it in Dataset::get for a draw per
// image. Random draws come from the generator given at construction, else from
// data::batch_generator() (a loader's per-batch generator, so augmentation does not
// depend on num_workers).
export module infini.nn:transforms;
import infini.std;
import infini.autograd;

export namespace infini::data {

using Transform = std::function<Tensor(const Tensor& image)>;

// (x - mean[c]) / std[c] per channel c; x floating point.
class Normalize {
 public:
  // Error unless mean and std have the same, non-zero length and every std is non-zero.
  Normalize(std::vector<double> mean, std::vector<double> std);
  // ShapeError unless x has >= 3 dims and mean.size() channels (dim -3); DTypeError unless floating.
  Tensor operator()(const Tensor& x) const;

 private:
  std::vector<double> mean_, std_;
};

// Reverses the width (last) dim with probability p.
class RandomHorizontalFlip {
 public:
  // Error unless 0 <= p <= 1.
  explicit RandomHorizontalFlip(double p = 0.5, Generator* generator = nullptr);
  // ShapeError unless x has >= 2 dims.
  Tensor operator()(const Tensor& x) const;

 private:
  double p_;
  Generator* generator_;
};

// A (height, width) window at a random position of x padded with `padding` zeros on every
// side: top uniform in [0, H + 2 padding - height], left in [0, W + 2 padding - width].
class RandomCrop {
 public:
  // size {height, width}. Error unless height, width >= 1 and padding >= 0.
  explicit RandomCrop(std::array<std::int64_t, 2> size, std::int64_t padding = 0, Generator* generator = nullptr);
  // A square size x size crop.
  explicit RandomCrop(std::int64_t size, std::int64_t padding = 0, Generator* generator = nullptr)
      : RandomCrop({size, size}, padding, generator) {}
  // ShapeError unless x has >= 2 dims and the padded image holds the crop.
  Tensor operator()(const Tensor& x) const;

 private:
  std::int64_t height_, width_, padding_;
  Generator* generator_;
};

// The transforms applied in order.
class Compose {
 public:
  explicit Compose(std::vector<Transform> transforms) : transforms_(std::move(transforms)) {}
  Tensor operator()(const Tensor& x) const;

 private:
  std::vector<Transform> transforms_;
};

}  // namespace infini::data
