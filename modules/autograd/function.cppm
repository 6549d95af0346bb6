// Building blocks of differentiable ops: SavedTensor (a tensor kept for backward, checked
// against in-place changes), FunctionNode (a node whose backward is a closure) and
// record(), which attaches such a node to an op's outputs when any input needs grad.
export module infini.autograd:function;
import infini.std;
import infini.kernels;
import :numerics;

export namespace infini {

using TensorList = std::vector<Tensor>;

// A tensor saved for backward. Outputs of the node that saves them are kept without their
// history (a node holding its own output would be a reference cycle) and get it back on
// unpack, so that double backward through them works.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output);
  // The saved tensor; Error if it was modified in place since it was saved, or released.
  Tensor unpack(const std::shared_ptr<Node>& owner) const;
  void release() { data_ = Tensor(); released_ = true; }

 private:
  Tensor data_;
  bool is_output_ = false;
  bool released_ = false;
  std::uint64_t version_ = 0;
  std::uint32_t output_nr_ = 0;
  bool requires_grad_ = false;
};

// Where the gradient of `t` goes: its grad_fn, its leaf accumulator, or nowhere.
Edge gradient_edge(const Tensor& t);

// backward(grad_outputs, saved) returns one gradient per input of the forward op (an
// undefined tensor where an input gets none). grad_outputs[i] is undefined when output i
// received no gradient.
using BackwardFn = std::function<TensorList(const TensorList& grad_outputs, const TensorList& saved)>;

class FunctionNode : public Node {
 public:
  FunctionNode(std::string_view op, std::vector<Edge> next_edges, std::uint32_t num_outputs, BackwardFn backward);
  TensorList apply(TensorList grad_outputs) override;
  void release_saved() override;
  // The forward op's name, e.g. "mul".
  const std::string& op() const noexcept { return op_; }
  // Shapes of the forward inputs, to check what backward returns.
  std::vector<Shape> input_shapes;
  std::vector<SavedTensor> saved;
  // Where the forward op ran, "h.3.mlp.c_fc (Linear)", while the precision checker is on.
  std::string module;

 private:
  std::string op_;
  BackwardFn backward_;
  bool released_ = false;
};

// Records `outputs` of op as computed from `inputs` when grad mode is on and any input
// requires grad: outputs get a FunctionNode with one edge per input. `saved` are kept for
// backward (any of them may be among the outputs). Returns the node, or null.
std::shared_ptr<FunctionNode> record(std::string_view op, const TensorList& inputs, const TensorList& outputs,
                                     const TensorList& saved, BackwardFn backward);

// True when grad mode is on and some input requires grad.
bool any_needs_grad(const TensorList& inputs);

// `y`, the output of op `op` on `inputs` that records no history (no input needs grad): the
// precision checker looks at it as record() looks at recorded outputs. Nothing is copied
// while the checker is off (this is the no-grad path of every binary op).
inline Tensor unrecorded(std::string_view op, const TensorList& inputs, Tensor y) {
  if (numerics::checking()) numerics::check_forward(op, inputs, {y});
  return y;
}
inline Tensor unrecorded(std::string_view op, const Tensor& a, const Tensor& b, Tensor y) {
  if (numerics::checking()) numerics::check_forward(op, {a, b}, {y});
  return y;
}

}  // namespace infini
