// Tensor messages with a dtype and shape header (see tensor_messages.cppm).
module;
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

constexpr std::int64_t kHeaderLength = 3 + kMaxMessageDims;  // dtype, on CUDA (0 or 1), dims, sizes

}  // namespace

Work send_tensor(ProcessGroup& group, const Tensor& t, int peer, int tag) {
  if (t.dim() > kMaxMessageDims)
    throw ShapeError("send_tensor", concat("tensors of up to ", kMaxMessageDims, " dims, got ", t.shape()));
  std::vector<std::int64_t> header(static_cast<std::size_t>(kHeaderLength), 0);
  header[0] = static_cast<std::int64_t>(t.dtype());
  header[1] = t.device().is_cuda() ? 1 : 0;
  header[2] = t.dim();
  for (std::int64_t d = 0; d < t.dim(); ++d) header[static_cast<std::size_t>(3 + d)] = t.size(d);
  const Tensor header_tensor = from_vector(header, {kHeaderLength});
  return when_all({group.send(header_tensor, peer, tag), group.send(t, peer, tag)});
}

TensorReceive::TensorReceive(ProcessGroup& group, int peer, int tag, CommOptions options)
    : group_(&group),
      peer_(peer),
      tag_(tag),
      options_(options),
      header_(empty({kHeaderLength}, {.dtype = kInt64})),
      header_work_(group.recv(header_, peer, tag, options)) {}

Tensor TensorReceive::start_data() {
  const std::int64_t* h = header_.data_ptr<std::int64_t>();
  if (h[0] < 0 || h[0] >= kDataTypeCount || (h[1] != 0 && h[1] != 1) || h[2] < 0 || h[2] > kMaxMessageDims)
    throw Error("TensorReceive", concat("a message header from rank ", peer_, " with tag ", tag_, " names dtype ", h[0],
                                        ", device kind ", h[1], " and ", h[2], " dims: not a send_tensor message"));
  // A CUDA tensor arrives on this rank's GPU, the device the group is bound to (an unbound
  // group knows none).
  const std::optional<Device> bound = group_->device();
  if (h[1] == 1 && !(bound && bound->is_cuda()))
    throw DeviceError("TensorReceive", concat("rank ", peer_, " sent a CUDA tensor with tag ", tag_, ", but group '",
                                              group_->name(), "' is not bound to a CUDA device on this rank"));
  Shape shape(h + 3, h + 3 + h[2]);
  data_ = empty(shape, {.dtype = static_cast<DataType>(h[0]), .device = h[1] == 1 ? *bound : Device::cpu()});
  data_work_ = group_->recv(data_, peer_, tag_, options_);
  return data_;
}

asio::awaitable<Tensor> TensorReceive::tensor() {
  co_await Work(header_work_);
  start_data();
  co_await Work(data_work_);
  co_return data_;
}

Tensor TensorReceive::wait() {
  header_work_.wait();
  start_data();
  data_work_.wait();
  return data_;
}

}  // namespace infini::parallel
