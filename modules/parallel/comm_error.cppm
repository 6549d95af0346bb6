// CommError: a collective or point-to-point operation failed, timed out, or its group was
// already broken by an earlier failure. The message names the operation, the group, the
// peers, the tensor and the operation's sequence number in its group.
export module infini.parallel:comm_error;
import infini.std;
import infini.tensor;

export namespace infini::parallel {

class CommError : public Error {
 public:
  CommError(std::string_view op, std::string_view message, bool timed_out = false)
      : Error(op, message), timed_out_(timed_out) {}
  bool timed_out() const noexcept { return timed_out_; }

 private:
  bool timed_out_;
};

}  // namespace infini::parallel
