// Tensor messages with a dtype and shape header (see tensor_messages.cppm).
module;
#include <cstdint>
module infini.parallel;
import infini.std;

namespace infini::parallel {
namespace {

constexpr std::int64_t kHeaderLength = 2 + kMaxMessageDims;  // dtype, dims, sizes

}  // namespace

Work send_tensor(ProcessGroup& group, const Tensor& t, int peer, int tag) {
  if (t.dim() > kMaxMessageDims)
    throw ShapeError("send_tensor", concat("tensors of up to ", kMaxMessageDims, " dims, got ", t.shape()));
  std::vector<std::int64_t> header(static_cast<std::size_t>(kHeaderLength), 0);
  header[0] = static_cast<std::int64_t>(t.dtype());
  header[1] = t.dim();
  for (std::int64_t d = 0; d < t.dim(); ++d) header[static_cast<std::size_t>(2 + d)] = t.size(d);
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
  if (h[0] < 0 || h[0] >= kDataTypeCount || h[1] < 0 || h[1] > kMaxMessageDims)
    throw Error("TensorReceive", concat("a message header from rank ", peer_, " with tag ", tag_,
                                        " names dtype ", h[0], " and ", h[1], " dims: not a send_tensor message"));
  Shape shape(h + 2, h + 2 + h[1]);
  data_ = empty(shape, {.dtype = static_cast<DataType>(h[0])});
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
