// CPU copy (with dtype conversion) and fill kernels.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

// A copy in which dst is contiguous along its last dim but src along the one before
// (a transpose, e.g. t().contiguous()) walks 32 x 32 tiles, so that both the rows read and
// the rows written stay in cache. Returns false when the layout is not of that kind.
template <class D, class S>
bool copy_transposed(D* out, const S* in, const Shape& shape, const Strides& out_strides, const Strides& in_strides) {
  constexpr std::int64_t kTile = 32;
  const StridedLayout<2> layout = coalesce<2>(shape, {out_strides, in_strides});
  const std::size_t nd = layout.shape.size();
  if (nd < 2) return false;
  const Strides& os = layout.strides[0];
  const Strides& is = layout.strides[1];
  if (os[nd - 1] != 1 || is[nd - 2] != 1 || is[nd - 1] == 1) return false;
  const std::int64_t rows = layout.shape[nd - 2], cols = layout.shape[nd - 1];
  const std::int64_t tile_rows = (rows + kTile - 1) / kTile, tile_cols = (cols + kTile - 1) / kTile;
  std::int64_t batch = 1;
  for (std::size_t d = 0; d + 2 < nd; ++d) batch *= layout.shape[d];
  const std::int64_t tasks = batch * tile_rows * tile_cols;
  auto run = [&](std::int64_t task) {
    const std::int64_t tile = task % (tile_rows * tile_cols);
    std::int64_t o = 0, i = 0;  // offsets of this task's batch entry
    for (std::int64_t d = static_cast<std::int64_t>(nd) - 3, rest = task / (tile_rows * tile_cols); d >= 0; --d) {
      o += rest % layout.shape[d] * os[d];
      i += rest % layout.shape[d] * is[d];
      rest /= layout.shape[d];
    }
    const std::int64_t r0 = tile / tile_cols * kTile, c0 = tile % tile_cols * kTile;
    for (std::int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
      for (std::int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
        out[o + r * os[nd - 2] + c] = convert<D>(in[i + r + c * is[nd - 1]]);
  };
  if (batch * rows * cols < kParallelGrain) {
    for (std::int64_t task = 0; task < tasks; ++task) run(task);
  } else {
#pragma omp parallel for schedule(static)
    for (std::int64_t task = 0; task < tasks; ++task) run(task);
  }
  return true;
}

void copy_cpu(const Tensor& dst, const Tensor& src) {
  dispatch(dst.dtype(), [&]<class D>() {
    dispatch(src.dtype(), [&]<class S>() {
      D* out = static_cast<D*>(dst.data_ptr());
      const S* in = static_cast<const S*>(src.data_ptr());
      if (copy_transposed(out, in, dst.shape(), dst.strides(), src.strides())) return;
      for_each_row<2>(dst.shape(), {dst.strides(), src.strides()},
                      [&](const std::array<std::int64_t, 2>& at, std::int64_t n, const std::array<std::int64_t, 2>& step) {
                        D* o = out + at[0];
                        const S* i = in + at[1];
                        if (step[0] == 1 && step[1] == 1) {
                          for (std::int64_t j = 0; j < n; ++j) o[j] = convert<D>(i[j]);
                        } else {
                          for (std::int64_t j = 0; j < n; ++j) o[j * step[0]] = convert<D>(i[j * step[1]]);
                        }
                      });
    });
  });
}

void fill_cpu(const Tensor& dst, const Scalar& value) {
  dispatch(dst.dtype(), [&]<class D>() {
    const D v = value.to<D>();
    D* out = static_cast<D*>(dst.data_ptr());
    for_each_row<1>(dst.shape(), {dst.strides()},
                    [&](const std::array<std::int64_t, 1>& at, std::int64_t n, const std::array<std::int64_t, 1>& step) {
                      for (std::int64_t j = 0; j < n; ++j) out[at[0] + j * step[0]] = v;
                    });
  });
}

const bool registered = [] {
  KernelTable<CopyKernel>::set(DeviceType::CPU, &copy_cpu);
  KernelTable<FillKernel>::set(DeviceType::CPU, &fill_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
