// Finite-difference checks of the analytical gradients (PyTorch's gradcheck and
// gradgradcheck): central differences on each input element against the Jacobian rows
// the engine computes, |analytical - numerical| <= atol + rtol * |numerical|.
export module infini.autograd:gradcheck;
import infini.std;
import infini.kernels;
import :function;

export namespace infini::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatch, when !ok
};

using DifferentiableFn = std::function<TensorList(const TensorList& inputs)>;

// Checks d(outputs)/d(inputs) for every input that requires grad (use float64, and inputs
// whose elements are distinct in memory: the check perturbs them in place).
GradcheckResult gradcheck(const DifferentiableFn& fn, const TensorList& inputs, GradcheckOptions options = {});

// gradcheck of the map (inputs, grad_outputs) -> d(outputs)/d(inputs) built with
// create_graph, with random grad_outputs: the second derivatives.
GradcheckResult gradgradcheck(const DifferentiableFn& fn, const TensorList& inputs, GradcheckOptions options = {});

}  // namespace infini::autograd
