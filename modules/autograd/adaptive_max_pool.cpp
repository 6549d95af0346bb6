// adaptive_max_pool2d(_with_indices): every adaptive window (rows [floor(i H / oH),
// ceil((i + 1) H / oH)), the columns likewise) gathered into a block padded to the longest
// window, then the max over the block with the index of its first maximum; the gradient
// goes to that element (through max and index_select).
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

using Ints = std::vector<std::int64_t>;

// The input indices of the adaptive windows along one dim of size `in`: window o is
// index[o * length, (o + 1) * length), the range [floor(o in / out), ceil((o + 1) in / out))
// padded to the longest window's length by repeating its last index. A repeat comes after
// the element it copies, so it changes neither the max nor where it first occurs.
struct Windows {
  Ints index;
  std::int64_t length = 1;
};

Windows adaptive_windows(std::int64_t in, std::int64_t out) {
  const auto start = [&](std::int64_t o) { return o * in / out; };
  const auto end = [&](std::int64_t o) { return ((o + 1) * in + out - 1) / out; };
  Windows w;
  for (std::int64_t o = 0; o < out; ++o) w.length = std::max(w.length, end(o) - start(o));
  for (std::int64_t o = 0; o < out; ++o)
    for (std::int64_t k = 0; k < w.length; ++k) w.index.push_back(std::min(start(o) + k, end(o) - 1));
  return w;
}

MaxPoolResult adaptive_max_pool(std::string_view op, const Tensor& x, ExpandingArray<2> output_size) {
  if (x.dtype() == kBool) throw DTypeError(op, "expected a numeric input, got bool");
  if (!output_size.has_value()) throw ShapeError(op, "output_size must be given");
  const Ints out = output_size.value_or(0);
  spatial::check_at_least(op, "output_size", out, 0);
  bool unbatched = false;
  const Tensor xb = spatial::batched(op, x, 2, unbatched);
  const std::int64_t n = xb.size(0), c = xb.size(1), w = xb.size(3);
  const Windows rows = adaptive_windows(xb.size(2), out[0]), cols = adaptive_windows(w, out[1]);
  const std::int64_t slots = rows.length * cols.length;
  const auto int64 = [&](const Ints& v, const Shape& shape) {
    return from_vector(v, shape, {.dtype = kInt64, .device = x.device()});
  };
  // (N, C, oH kH, oW kW) -> (N, C, oH, oW, kH kW): each window's elements, row-major.
  const Tensor block = index_select(index_select(xb, 2, int64(rows.index, {})), 3, int64(cols.index, {}))
                           .view({n, c, out[0], rows.length, out[1], cols.length})
                           .permute({0, 1, 2, 4, 3, 5})
                           .reshape({n, c, out[0], out[1], slots});
  const auto [values, slot] = max(block, 4);
  // position (oH, oW, kH kW): the input position ih * W + iw of each slot of each window.
  Ints position;
  for (std::int64_t i = 0; i < out[0]; ++i)
    for (std::int64_t j = 0; j < out[1]; ++j)
      for (std::int64_t a = 0; a < rows.length; ++a)
        for (std::int64_t b = 0; b < cols.length; ++b)
          position.push_back(rows.index[i * rows.length + a] * w + cols.index[j * cols.length + b]);
  const Tensor positions = int64(position, {out[0], out[1], slots}).expand({n, c, out[0], out[1], slots});
  const Tensor indices = gather(positions, 4, slot.unsqueeze(4)).squeeze(4);
  return {unbatched ? values.squeeze(0) : values, unbatched ? indices.squeeze(0) : indices};
}

}  // namespace

MaxPoolResult adaptive_max_pool2d_with_indices(const Tensor& x, ExpandingArray<2> output_size) {
  return adaptive_max_pool("adaptive_max_pool2d_with_indices", x, output_size);
}

Tensor adaptive_max_pool2d(const Tensor& x, ExpandingArray<2> output_size) {
  return adaptive_max_pool("adaptive_max_pool2d", x, output_size).values;
}

}  // namespace infini
