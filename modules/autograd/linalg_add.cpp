// The fused-add matrix products addmm, addmv and addbmm: beta * input + alpha * product,
// input broadcast to the product's shape. Each checks its operands under its own name, then
// runs as baddbmm on a batch of one (addbmm folds its batch into the inner dim), so values,
// the beta == 0 rule and the gradients (input: beta * g summed to its shape) are baddbmm's.
module;
#include <cstdint>
module infini.autograd;
import infini.std;

namespace infini {
namespace {


void expect_dims(std::string_view op, const char* names, const Tensor& a, std::int64_t da, const Tensor& b,
                 std::int64_t db) {
  if (a.dim() != da || b.dim() != db)
    throw ShapeError(
        op, concat("expected ", names, " of ", da, " and ", db, " dims, got shapes ", a.shape(), " and ", b.shape()));
}

// Devices and dtypes as matmul wants them, and input's shape against the result's.
void check_operands(std::string_view op, const Tensor& input, const Tensor& a, const Tensor& b, const Shape& result) {
  if (!input.defined()) throw Error(op, "the input tensor is undefined");
  if (a.device() != b.device() || input.device() != a.device())
    throw DeviceError(
        op, concat("expected all tensors on one device, got ", input.device(), ", ", a.device(), " and ", b.device()));
  if (a.dtype() != b.dtype() || input.dtype() != a.dtype())
    throw DTypeError(op, concat("expected input and operands of one dtype, got ", input.dtype(), ", ", a.dtype(),
                                " and ", b.dtype()));
  if (!is_floating_point(a.dtype()))
    throw DTypeError(op,
                     concat("operands of dtype ", a.dtype(), " are not supported (expected a floating-point dtype)"));
  if (!broadcasts_to(input.shape(), result))
    throw ShapeError(op,
                     concat("input of shape ", input.shape(), " does not broadcast to the product's shape ", result));
}

}  // namespace

// input (broadcast to (m, n)) + mat1 (m, k) @ mat2 (k, n): baddbmm on (1, m, k) @ (1, k, n).
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, mat1); cast)
    return addmm(cast(input), cast(mat1), cast(mat2), beta, alpha);
  constexpr std::string_view op = "addmm";
  expect_dims(op, "mat1 and mat2", mat1, 2, mat2, 2);
  if (mat1.shape()[1] != mat2.shape()[0])
    throw ShapeError(
        op, concat("mat1 of shape ", mat1.shape(), " and mat2 of shape ", mat2.shape(), " cannot be multiplied"));
  check_operands(op, input, mat1, mat2, {mat1.shape()[0], mat2.shape()[1]});
  return baddbmm(input, mat1.unsqueeze(0), mat2.unsqueeze(0), beta, alpha).squeeze(0);
}

// input (broadcast to (m)) + mat (m, k) @ vec (k): baddbmm on (1, m, k) @ (1, k, 1), input as
// a column (m, 1).
Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, const Scalar& beta, const Scalar& alpha) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, mat); cast)
    return addmv(cast(input), cast(mat), cast(vec), beta, alpha);
  constexpr std::string_view op = "addmv";
  expect_dims(op, "mat and vec", mat, 2, vec, 1);
  const std::int64_t m = mat.shape()[0];
  if (mat.shape()[1] != vec.shape()[0])
    throw ShapeError(op,
                     concat("mat of shape ", mat.shape(), " and vec of shape ", vec.shape(), " cannot be multiplied"));
  check_operands(op, input, mat, vec, {m});
  const Tensor column = (input.dim() == 0 ? input.unsqueeze(0) : input).unsqueeze(1);
  return baddbmm(column, mat.unsqueeze(0), vec.unsqueeze(1).unsqueeze(0), beta, alpha).reshape({m});
}

// input (broadcast to (m, n)) + sum over b of batch1[b] (m, k) @ batch2[b] (k, n), which is
// batch1 as (m, b * k) @ batch2 as (b * k, n): one product.
Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
              const Scalar& alpha) {
  if (const AutocastRegion cast(CastPolicy::kLowerPrecision, batch1); cast)
    return addbmm(cast(input), cast(batch1), cast(batch2), beta, alpha);
  constexpr std::string_view op = "addbmm";
  expect_dims(op, "batch1 and batch2", batch1, 3, batch2, 3);
  const std::int64_t b = batch1.shape()[0], m = batch1.shape()[1], k = batch1.shape()[2], n = batch2.shape()[2];
  if (batch2.shape()[0] != b || batch2.shape()[1] != k)
    throw ShapeError(op, concat("batch1 of shape ", batch1.shape(), " and batch2 of shape ", batch2.shape(),
                                " cannot be multiplied (expected (b, m, k) and (b, k, n))"));
  check_operands(op, input, batch1, batch2, {m, n});
  const Tensor rows = batch1.permute({1, 0, 2}).reshape({1, m, b * k}), columns = batch2.reshape({1, b * k, n});
  return baddbmm(input, rows, columns, beta, alpha).squeeze(0);
}

}  // namespace infini
