// A short tour of infini.tensor: factories, views that share storage, copies with
// dtype conversion, random numbers and allocator statistics.
#include <cstdio>
#include <iostream>
import infini.tensor;

using namespace infini;

int main() {
  manual_seed(0);
  const Tensor a = arange(12, {.dtype = kFloat32}).view({3, 4});
  std::cout << "a = arange(12).view({3, 4})\n" << a << "\n\n";
  std::cout << "a.t()  (a view: strides " << shape_str(a.t().strides()) << ")\n" << a.t() << "\n\n";
  std::cout << "a.slice(1, 0, 4, 2)  (every other column)\n" << a.slice(1, 0, 4, 2) << "\n\n";
  std::cout << "a.diagonal()\n" << a.diagonal() << "\n\n";
  std::cout << "a.unfold(1, 2, 1)[0]  (sliding windows)\n" << a.unfold(1, 2, 1).select(0, 0) << "\n\n";
  std::cout << "a.select(0, 1).expand({2, 4})\n" << a.select(0, 1).expand({2, 4}) << "\n\n";
  std::cout << "a.to(float16)\n" << a.to(kFloat16) << "\n\n";
  std::cout << "randn({2, 3})\n" << randn({2, 3}) << "\n\n";
  std::cout << "randint(0, 10, {8})\n" << randint(0, 10, {8}) << "\n\n";
  std::cout << "linspace(0, 1, 5, float64)\n" << linspace(0, 1, 5, {.dtype = kFloat64}) << "\n\n";
  std::cout << "eye(3, bool)\n" << eye(3, {.dtype = kBool}) << "\n\n";
  std::cout << "arange(2000) (summarised)\n" << arange(2000) << "\n\n";
  try {
    a.t().view({12});
  } catch (const Error& e) {
    std::cout << "a.t().view({12}) raises: " << e.what() << "\n\n";
  }
  const MemoryStats stats = memory_stats(Device::cpu());
  std::printf("CPU memory: %lld bytes allocated, %lld reserved, peak %lld\n",
              static_cast<long long>(stats.allocated_bytes), static_cast<long long>(stats.reserved_bytes),
              static_cast<long long>(stats.peak_allocated_bytes));
  std::printf("CUDA devices: %d\n", cuda_device_count());
  return 0;
}
