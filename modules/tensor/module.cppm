// infini.tensor: dtypes, devices, storage and allocators, the strided Tensor and its
// views, factories, random numbers, the kernel registry and the trace recorder.
export module infini.tensor;
export import :error;
export import :half;
export import :dtype;
export import :device;
export import :scalar;
export import :shape;
export import :storage;
export import :cuda_graph;
export import :generator;
export import :tensor;
export import :trace;
export import :dispatch;
export import :factories;
export import :autograd_meta;
