// Point-to-point messages that carry their tensor's dtype and shape, so a receiver (a pipeline
// stage) needs to know neither in advance: a small int64 header (dtype, CPU or CUDA, dims,
// sizes) and then the data, both with the same tag from the same sender, which MPI delivers in
// order. A CUDA tensor arrives on the receiving rank's GPU, the device its group is bound to.
//
//   Work sent = send_tensor(*group, activation, next, tag);        // rank r
//   TensorReceive incoming(*group, previous, tag);                 // rank r + 1, posted early
//   Tensor x = co_await incoming.tensor();                         // or incoming.wait()
export module infini.parallel:tensor_messages;
import infini.std;
import infini.tensor;
import :runtime;
import :process_group;
import :work;
import :asio;

export namespace infini::parallel {

inline constexpr int kMaxMessageDims = 8;

// Sends t (any dtype, up to kMaxMessageDims dims, any strides) to group rank `peer`; the Work
// completes when header and data are sent. Error for more dims.
Work send_tensor(ProcessGroup& group, const Tensor& t, int peer, int tag);

// A receive of one send_tensor from `peer` with `tag`, its header posted at construction.
class TensorReceive {
 public:
  TensorReceive(ProcessGroup& group, int peer, int tag, CommOptions options = {});
  // The tensor (on the CPU, or the group's GPU for a CUDA send), once header and data arrived. Call one of them once; Error from a
  // header that names no dtype or too many dims.
  asio::awaitable<Tensor> tensor();
  Tensor wait();

 private:
  Tensor start_data();  // reads the header, posts the data receive
  ProcessGroup* group_;
  int peer_, tag_;
  CommOptions options_;
  Tensor header_, data_;
  Work header_work_, data_work_;
};

}  // namespace infini::parallel
