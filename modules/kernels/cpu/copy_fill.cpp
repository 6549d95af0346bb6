// CPU copy (with dtype conversion) and fill kernels.
module;
#include <array>
#include <cstdint>
module infini.kernels;

namespace infini::kernels {
namespace {

void copy_cpu(const Tensor& dst, const Tensor& src) {
  dispatch(dst.dtype(), [&]<class D>() {
    dispatch(src.dtype(), [&]<class S>() {
      D* out = static_cast<D*>(dst.data_ptr());
      const S* in = static_cast<const S*>(src.data_ptr());
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
