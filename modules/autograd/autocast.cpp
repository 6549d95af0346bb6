// Autocast's thread-local state: per device type on/off and dtype, the depth of live
// guards, whether an autocast op or a backward pass has turned it off, and the cache of
// cast parameters.
module;
#include <cstddef>
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {

struct DeviceAutocast {
  bool enabled = false;
  DataType dtype;
};

thread_local std::array<DeviceAutocast, kDeviceTypeCount> device_state{
    {{.enabled = false, .dtype = kBFloat16}, {.enabled = false, .dtype = kFloat16}}};
thread_local int guard_depth = 0;
thread_local bool suspended = false;

// A parameter's cast, valid until the outermost guard ends or the parameter changes in
// place (its version moves). grad_mode: casts made without grad have no history, so they
// are kept apart from those made with it.
struct CachedCast {
  Tensor source;
  std::uint64_t version;
  bool grad_mode;
  Tensor cast;
};
thread_local std::vector<CachedCast> cast_cache;

DeviceAutocast& state_of(DeviceType device) { return device_state[static_cast<std::size_t>(device)]; }

// t as `dtype`, through the cache for leaf tensors that require grad.
Tensor cast_to(const Tensor& t, DataType dtype) {
  if (!(t.requires_grad() && t.is_leaf())) return t.to(dtype);
  const bool grad_mode = GradMode::is_enabled();
  for (CachedCast& c : cast_cache) {
    if (!c.source.is_same(t) || c.grad_mode != grad_mode || c.cast.dtype() != dtype) continue;
    if (c.version != t.version()) c = {t, t.version(), grad_mode, t.to(dtype)};
    return c.cast;
  }
  Tensor cast = t.to(dtype);
  cast_cache.push_back({t, t.version(), grad_mode, cast});
  return cast;
}

}  // namespace

AutocastGuard::AutocastGuard(DeviceType device, DataType dtype, bool enabled)
    : device_(device), was_enabled_(state_of(device).enabled), was_dtype_(state_of(device).dtype) {
  if (dtype != kBFloat16 && dtype != kFloat16)
    throw DTypeError("autocast", concat("expected bfloat16 or float16 as the lower precision, got ", dtype));
  state_of(device) = {.enabled = enabled, .dtype = dtype};
  ++guard_depth;
}

AutocastGuard::~AutocastGuard() {
  state_of(device_) = {.enabled = was_enabled_, .dtype = was_dtype_};
  if (--guard_depth == 0) cast_cache.clear();
}

bool is_autocast_enabled(DeviceType device) { return state_of(device).enabled; }
DataType autocast_dtype(DeviceType device) { return state_of(device).dtype; }

AutocastRegion::AutocastRegion(CastPolicy policy, const Tensor& first) : policy_(policy) {
  if (suspended || !first.defined()) return;
  device_ = first.device().type;
  if (!state_of(device_).enabled) return;
  active_ = true;
  suspended = true;
}

AutocastRegion::~AutocastRegion() {
  if (active_) suspended = false;
}

Tensor AutocastRegion::operator()(const Tensor& t) const {
  if (!active_ || !t.defined() || t.device().type != device_) return t;
  const DataType from = t.dtype();
  if (from != kFloat32 && from != kFloat16 && from != kBFloat16) return t;  // float64 and non-floating stay
  const DataType to = policy_ == CastPolicy::kFloat32 ? kFloat32 : state_of(device_).dtype;
  return from == to ? t : cast_to(t, to);
}

std::optional<Tensor> AutocastRegion::operator()(const std::optional<Tensor>& t) const {
  if (!t) return t;
  return (*this)(*t);
}

AutocastSuspension::AutocastSuspension() : was_suspended_(suspended) { suspended = true; }
AutocastSuspension::~AutocastSuspension() { suspended = was_suspended_; }

}  // namespace infini
