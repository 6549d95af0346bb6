// infini.kernels: the CPU kernels (OpenMP) and the registration of CPU and CUDA kernels
// into infini.tensor's kernel tables, plus the strided-loop helper kernels are built on.
export module infini.kernels;
export import infini.tensor;
export import :strided_loop;
export import :ops;
export import :shape;
export import :reduce_ops;
export import :attention;
export import :cross_entropy;
export import :layer_norm;
export import :index;
export import :linalg;
export import :conv;
import :elementwise_math;  // internal to the CPU kernels
