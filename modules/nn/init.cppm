// nn::init: in-place parameter initialisation with torch.nn.init's names, defaults and
// formulas. Every function writes under NoGradGuard into the tensor it is given (any
// strides, device and floating-point dtype), draws from `generator` (the default generator
// when null) and returns the tensor. Random values are drawn in float32 (float64 for a
// float64 tensor) and rounded once into the tensor's dtype.
export module infini.nn:init;
import infini.std;
export import infini.autograd;

export namespace infini::nn::init {

// The layers a gain is asked for (torch.nn.init.calculate_gain's names).
enum class Nonlinearity {
  Linear, Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
  Sigmoid, Tanh, ReLU, LeakyReLU, SELU
};
enum class FanMode { FanIn, FanOut };

struct Fans {
  std::int64_t fan_in = 0;
  std::int64_t fan_out = 0;
};

// For a weight (out, in, k1, k2, ...): fan_in = in * k1 * k2 ..., fan_out = out * k1 * k2 ...
// ShapeError for fewer than 2 dims.
Fans calculate_fan_in_and_fan_out(const Tensor& tensor);

// The recommended gain: 1 for linear/conv/sigmoid, 5/3 for tanh, sqrt(2) for relu,
// sqrt(2 / (1 + slope^2)) for leaky_relu (param = negative slope, default 0.01), 3/4 for selu.
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = {});

// U(a, b): values in [a, b] (b itself only through rounding into the tensor's dtype).
Tensor uniform_(const Tensor& tensor, double a = 0, double b = 1, Generator* generator = nullptr);
// N(mean, std^2).
Tensor normal_(const Tensor& tensor, double mean = 0, double std = 1, Generator* generator = nullptr);
// Advances the generator past what normal_ (or uniform_) of `numel` elements draws, without
// drawing: a model built in part keeps the whole model's values for the pieces it has.
void skip_draws(std::int64_t numel, Generator* generator = nullptr);
// N(mean, std^2) restricted to [a, b] (absolute bounds), by the inverse-CDF method in float64.
Tensor trunc_normal_(const Tensor& tensor, double mean = 0, double std = 1, double a = -2, double b = 2,
                     Generator* generator = nullptr);
Tensor constant_(const Tensor& tensor, const Scalar& value);
Tensor zeros_(const Tensor& tensor);
Tensor ones_(const Tensor& tensor);

// Glorot: std = gain * sqrt(2 / (fan_in + fan_out)); uniform bound sqrt(3) * std.
Tensor xavier_uniform_(const Tensor& tensor, double gain = 1, Generator* generator = nullptr);
Tensor xavier_normal_(const Tensor& tensor, double gain = 1, Generator* generator = nullptr);
// He: std = calculate_gain(nonlinearity, a) / sqrt(fan); uniform bound sqrt(3) * std.
// `a` is the negative slope of the leaky_relu that follows.
Tensor kaiming_uniform_(const Tensor& tensor, double a = 0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* generator = nullptr);
Tensor kaiming_normal_(const Tensor& tensor, double a = 0, FanMode mode = FanMode::FanIn,
                       Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* generator = nullptr);

// A (semi-)orthogonal matrix times gain, for a tensor of >= 2 dims viewed as
// (size(0), numel / size(0)): the Q of the QR decomposition of a normal matrix, with R's
// diagonal made positive (Saxe et al. 2013). Rows are orthonormal when there are fewer rows
// than columns, columns otherwise.
Tensor orthogonal_(const Tensor& tensor, double gain = 1, Generator* generator = nullptr);

}  // namespace infini::nn::init
