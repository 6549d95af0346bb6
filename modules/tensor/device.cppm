// Device: where a tensor's memory lives. "cpu" or "cuda:N".
export module infini.tensor:device;
import infini.std;
import :error;

export namespace infini {

enum class DeviceType : std::uint8_t { CPU, CUDA };
inline constexpr int kDeviceTypeCount = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // always 0 for CPU

  static constexpr Device cpu() noexcept { return {DeviceType::CPU, 0}; }
  static constexpr Device cuda(int index = 0) noexcept { return {DeviceType::CUDA, index}; }
  // Parses "cpu", "cuda" and "cuda:N"; throws DeviceError otherwise.
  static Device parse(std::string_view text);

  constexpr bool is_cpu() const noexcept { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const noexcept { return type == DeviceType::CUDA; }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
  friend constexpr bool operator==(Device, Device) = default;
};

inline std::ostream& operator<<(std::ostream& out, Device d) { return out << d.str(); }

inline Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:") && text.size() > 5 && text.size() <= 9) {
    int index = 0;
    for (char c : text.substr(5)) {
      if (c < '0' || c > '9') throw DeviceError("Device::parse", concat("expected 'cpu' or 'cuda:N', got '", text, "'"));
      index = index * 10 + (c - '0');
    }
    return cuda(index);
  }
  throw DeviceError("Device::parse", concat("expected 'cpu' or 'cuda:N', got '", text, "'"));
}

}  // namespace infini
