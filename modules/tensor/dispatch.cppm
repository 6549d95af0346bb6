// Kernel registry: one table per op signature, keyed by device type. An op is a tag
// struct with a name and a function-pointer type, so registering or calling a kernel
// with the wrong signature does not compile (no void* casts). infini.kernels fills the
// tables when the library loads; a missing entry is a DeviceError naming op and device.
export module infini.tensor:dispatch;
import infini.std;
import :error;
import :device;
import :generator;
import :scalar;
import :tensor;
import :trace;

export namespace infini {

// A kernel table as the registry lists it: the op's name and which devices have an entry.
struct KernelTableInfo {
  std::string_view name;
  bool (*has)(DeviceType device) noexcept;
};

// Every kernel table that has been given an entry, in the order of their first entries.
// Lets a test check that each table with a CPU kernel has a CUDA one where CUDA is built.
std::vector<KernelTableInfo> kernel_tables();
void register_kernel_table(KernelTableInfo info);

template <class Op>
class KernelTable {
 public:
  using Fn = typename Op::Fn;

  static void set(DeviceType device, Fn fn) noexcept {
    if (!listed_) {
      listed_ = true;
      register_kernel_table({Op::name, &has});
    }
    table_[static_cast<int>(device)] = fn;
  }

  static bool has(DeviceType device) noexcept { return table_[static_cast<int>(device)] != nullptr; }

  static Fn get(Device device) {
    Fn fn = table_[static_cast<int>(device.type)];
    if (!fn)
      throw DeviceError(Op::name, concat("no kernel for ", device, device.is_cuda() ? " (this build of Infini has no "
                                                                                        "CUDA backend)" : ""));
    return fn;
  }

  template <class... Args>
  static decltype(auto) call(Device device, Args&&... args) {
    if (!trace::recording()) return get(device)(std::forward<Args>(args)...);
    const trace::Span span(Op::name, "op");
    return get(device)(std::forward<Args>(args)...);
  }

 private:
  static inline std::array<Fn, kDeviceTypeCount> table_{};
  static inline bool listed_ = false;
};

// The ops of infini.tensor. Kernels may assume what each comment promises; callers check it.

// dst[i] = convert(src[i]): same shape and device, any strides and dtypes, no overlap
// between dst and src, no two elements of dst at one address.
struct CopyKernel {
  static constexpr std::string_view name = "copy_";
  using Fn = void (*)(const Tensor& dst, const Tensor& src);
};

// dst[i] = value converted to dst's dtype; no two elements of dst at one address.
struct FillKernel {
  static constexpr std::string_view name = "fill_";
  using Fn = void (*)(const Tensor& dst, const Scalar& value);
};

// Random fills of a contiguous floating-point (uniform, normal) or integer (randint) tensor;
// element i uses Philox counter state.offset + i.
struct UniformKernel {  // [low, high)
  static constexpr std::string_view name = "uniform_";
  using Fn = void (*)(const Tensor& out, double low, double high, PhiloxState state);
};
struct NormalKernel {
  static constexpr std::string_view name = "normal_";
  using Fn = void (*)(const Tensor& out, double mean, double std, PhiloxState state);
};
struct RandintKernel {  // [low, high)
  static constexpr std::string_view name = "randint";
  using Fn = void (*)(const Tensor& out, std::int64_t low, std::int64_t high, PhiloxState state);
};

}  // namespace infini
