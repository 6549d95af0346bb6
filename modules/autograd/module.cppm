// infini.autograd: the dynamic-graph autograd engine and the differentiable ops.
export module infini.autograd;
export import infini.kernels;
export import :numerics;
export import :function;
export import :engine;
export import :elementwise;
export import :reduction;
export import :shape;
export import :gradcheck;
export import :op_list;
export import :nn_functional;
export import :attention;
export import :indexing;
export import :linalg;
export import :conv;
export import :autocast;
export import :checkpoint;
