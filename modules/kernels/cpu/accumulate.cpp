// CPU accumulate_: parallel when dst's elements are distinct, serial otherwise.
module;
#include <cstdint>
module infini.kernels;
import infini.std;

namespace infini::kernels {
namespace {

void accumulate_cpu(const Tensor& dst, const Tensor& src) {
  dispatch(dst.dtype(), [&]<class T>() {
    using C = compute_t<T>;
    T* o = static_cast<T*>(dst.data_ptr());
    const T* x = static_cast<const T*>(src.data_ptr());
    auto row = [&](const std::array<std::int64_t, 2>& at, std::int64_t n, const std::array<std::int64_t, 2>& s) {
      for (std::int64_t j = 0; j < n; ++j) {
        T& out = o[at[0] + j * s[0]];
        out = T(static_cast<C>(out) + static_cast<C>(x[at[1] + j * s[1]]));
      }
    };
    if (!may_have_internal_overlap(dst)) return for_each_row<2>(dst.shape(), {dst.strides(), src.strides()}, row);
    // Overlapping destination: one thread, rows in order.
    const StridedLayout<2> layout = coalesce<2>(dst.shape(), {dst.strides(), src.strides()});
    const std::int64_t nd = static_cast<std::int64_t>(layout.shape.size());
    const std::int64_t inner = nd ? layout.shape.back() : 1;
    const std::array<std::int64_t, 2> step{nd ? layout.strides[0].back() : 0, nd ? layout.strides[1].back() : 0};
    for (std::int64_t r = 0; r < dst.numel() / std::max<std::int64_t>(inner, 1); ++r) {
      std::array<std::int64_t, 2> at{};
      for (std::int64_t d = nd - 2, rest = r; d >= 0; --d) {
        const std::int64_t i = rest % layout.shape[d];
        rest /= layout.shape[d];
        at[0] += i * layout.strides[0][d];
        at[1] += i * layout.strides[1][d];
      }
      row(at, inner, step);
    }
  });
}

const bool registered = [] {
  KernelTable<AccumulateKernel>::set(DeviceType::CPU, &accumulate_cpu);
  return true;
}();

}  // namespace
}  // namespace infini::kernels
