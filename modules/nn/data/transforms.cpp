// Normalize, RandomHorizontalFlip, RandomCrop and Compose (see transforms.cppm).
module;
#include <cstdint>
module infini.nn;
import infini.std;

namespace infini::data {
namespace {

Generator& generator_or_batch(Generator* generator) { return generator ? *generator : batch_generator(); }

// A uniform double in [0, 1) and a uniform integer in [0, n) from the generator.
double draw_uniform(Generator* generator) {
  return rand({}, {.dtype = kFloat64}, &generator_or_batch(generator)).item<double>();
}
std::int64_t draw_below(std::int64_t n, Generator* generator) {
  return randint(0, n, {}, {}, &generator_or_batch(generator)).item<std::int64_t>();
}

}  // namespace

Normalize::Normalize(std::vector<double> mean, std::vector<double> std) : mean_(std::move(mean)), std_(std::move(std)) {
  if (mean_.empty() || mean_.size() != std_.size())
    throw Error("Normalize", concat("mean and std need one entry per channel, got ", mean_.size(), " and ", std_.size()));
  for (std::size_t c = 0; c < std_.size(); ++c)
    if (std_[c] == 0.0) throw Error("Normalize", concat("std[", c, "] is zero"));
}

Tensor Normalize::operator()(const Tensor& x) const {
  if (!is_floating_point(x.dtype())) throw DTypeError("Normalize", concat("expected a floating-point image, got ", x.dtype()));
  const auto channels = static_cast<std::int64_t>(mean_.size());
  if (x.dim() < 3 || x.size(-3) != channels)
    throw ShapeError("Normalize", concat("expected (..., C, H, W) with C = ", channels, ", got ", x.shape()));
  const Tensor mean = from_vector(mean_, {channels, 1, 1}, {.dtype = x.dtype()});
  const Tensor std = from_vector(std_, {channels, 1, 1}, {.dtype = x.dtype()});
  return (x - mean) / std;
}

RandomHorizontalFlip::RandomHorizontalFlip(double p, Generator* generator) : p_(p), generator_(generator) {
  if (!(p >= 0.0 && p <= 1.0)) throw Error("RandomHorizontalFlip", concat("p must be in [0, 1], got ", p));
}

Tensor RandomHorizontalFlip::operator()(const Tensor& x) const {
  if (x.dim() < 2) throw ShapeError("RandomHorizontalFlip", concat("expected (..., H, W), got ", x.shape()));
  return draw_uniform(generator_) < p_ ? flip(x, {-1}) : x;
}

RandomCrop::RandomCrop(std::array<std::int64_t, 2> size, std::int64_t padding, Generator* generator)
    : height_(size[0]), width_(size[1]), padding_(padding), generator_(generator) {
  if (height_ < 1 || width_ < 1 || padding < 0)
    throw Error("RandomCrop", concat("size must be >= 1 and padding >= 0, got size ", height_, " x ", width_,
                                     ", padding ", padding));
}

Tensor RandomCrop::operator()(const Tensor& x) const {
  if (x.dim() < 2) throw ShapeError("RandomCrop", concat("expected (..., H, W), got ", x.shape()));
  const std::int64_t padded_h = x.size(-2) + 2 * padding_, padded_w = x.size(-1) + 2 * padding_;
  if (height_ > padded_h || width_ > padded_w)
    throw ShapeError("RandomCrop", concat("crop ", height_, " x ", width_, " is larger than the padded image ", padded_h,
                                          " x ", padded_w, " (input ", x.shape(), ", padding ", padding_, ")"));
  const std::int64_t top = draw_below(padded_h - height_ + 1, generator_);
  const std::int64_t left = draw_below(padded_w - width_ + 1, generator_);
  const Tensor padded = padding_ > 0 ? pad(x, {padding_, padding_, padding_, padding_}) : x;
  return padded.narrow(-2, top, height_).narrow(-1, left, width_).contiguous();
}

Tensor Compose::operator()(const Tensor& x) const {
  Tensor out = x;
  for (const Transform& transform : transforms_) out = transform(out);
  return out;
}

}  // namespace infini::data
