// Differentiable elementwise ops (NumPy broadcasting, PyTorch type promotion; f16/bf16
// computed in f32). Comparisons, logical ops and isnan/isinf return bool and carry no
// gradient. In-place forms are free functions ending in '_' (Tensor's own methods cannot
// be extended outside infini.tensor).
export module infini.autograd:elementwise;
import infini.std;
import infini.kernels;

export namespace infini {

// Every op of this family by name, for the op table test (tests/autograd/op_table_test.cpp).
inline constexpr std::array<std::string_view, 63> kElementwiseOps = {
    "add", "sub", "rsub", "mul", "div", "floor_divide", "pow", "maximum", "minimum", "logaddexp",
    "neg", "abs", "sign", "exp", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tanh", "sigmoid", "erf", "relu", "leaky_relu", "elu", "gelu", "gelu_tanh",
    "gelu_backward", "gelu_tanh_backward", "silu", "softplus", "clamp", "where", "lerp", "masked_fill",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
    "isnan", "isinf", "add_", "sub_", "mul_", "div_", "masked_fill_",
    "operator+", "operator-", "operator*", "operator/", "operator-(unary)", "operator+=", "operator*="};

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);  // a + alpha * b
Tensor add(const Tensor& a, const Scalar& b);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);  // a - alpha * b
Tensor sub(const Tensor& a, const Scalar& b);
Tensor rsub(const Tensor& a, const Scalar& b);  // b - a
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give float32
Tensor div(const Tensor& a, const Scalar& b);
Tensor div(const Scalar& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, const Tensor& b);  // floor(a / b); no gradient
Tensor floor_divide(const Tensor& a, const Scalar& b);
Tensor pow(const Tensor& base, const Tensor& exponent);
Tensor pow(const Tensor& base, const Scalar& exponent);
Tensor pow(const Scalar& base, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);  // NaN propagates; ties split the gradient
Tensor minimum(const Tensor& a, const Tensor& b);
// log(exp(a) + exp(b)) without overflow; the gradient w.r.t. a is sigmoid(a - b).
Tensor logaddexp(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1.0);
enum class GeluApproximation { None, Tanh };
Tensor gelu(const Tensor& x, GeluApproximation approximate = GeluApproximation::None);
// PyTorch's gelu_backward: g * gelu'(x) (g and x broadcast), gelu's input gradient: one fused
// kernel, whose own gradients are differentiable ops (gelu's derivatives of any order).
Tensor gelu_backward(const Tensor& g, const Tensor& x, GeluApproximation approximate = GeluApproximation::None);
Tensor silu(const Tensor& x);
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
// Bounds that are not given do not clamp; the gradient passes where min <= x <= max.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& condition, const Scalar& a, const Tensor& b);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);  // start + weight * (end - start)
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);

Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Scalar& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);

// In place: x = op(x, b). Recorded for autograd like PyTorch (an Error on leaves that
// require grad while grad mode is on); the version bump invalidates saved copies of x.
Tensor& add_(Tensor& x, const Tensor& b, const Scalar& alpha = 1);
Tensor& add_(Tensor& x, const Scalar& b);
Tensor& sub_(Tensor& x, const Tensor& b, const Scalar& alpha = 1);
Tensor& mul_(Tensor& x, const Tensor& b);
Tensor& mul_(Tensor& x, const Scalar& b);
Tensor& div_(Tensor& x, const Tensor& b);
Tensor& div_(Tensor& x, const Scalar& b);
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
inline Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
inline Tensor operator-(const Scalar& a, const Tensor& b) { return rsub(b, a); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
inline Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
inline Tensor operator/(const Scalar& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor& operator+=(Tensor& x, const Tensor& b) { return add_(x, b); }
inline Tensor& operator+=(Tensor& x, const Scalar& b) { return add_(x, b); }
inline Tensor& operator-=(Tensor& x, const Tensor& b) { return sub_(x, b); }
inline Tensor& operator*=(Tensor& x, const Tensor& b) { return mul_(x, b); }
inline Tensor& operator*=(Tensor& x, const Scalar& b) { return mul_(x, b); }
inline Tensor& operator/=(Tensor& x, const Tensor& b) { return div_(x, b); }
inline Tensor& operator/=(Tensor& x, const Scalar& b) { return div_(x, b); }

}  // namespace infini
