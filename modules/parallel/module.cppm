// infini.parallel: the asynchronous runtime (one Asio io_context per rank), process groups
// over MPI (CPU tensors) and NCCL (CUDA tensors), Work and its awaitable form, the flight
// recorder, the dp x tp x pp layout, data parallelism (DistributedDataParallel) and tensor /
// sequence parallelism (TensorParallel and its layers), pipeline schedules as coroutines and
// their simulator, the training plan that composes them for a model, and distributed
// checkpoints that load under any layout.
export module infini.parallel;
export import infini.nn;
export import :comm_error;
export import :flight_recorder;
export import :asio;
export import :runtime;
export import :work;
export import :backend_choice;
export import :process_group;
export import :layout;
export import :buckets;
export import :reducer;
export import :ddp;
export import :tp_mappings;
export import :tp_layers;
export import :vocab_cross_entropy;
export import :tensor_parallel;
export import :tensor_messages;
export import :pipeline_stage;
export import :pipeline_timeline;
export import :pipeline_simulator;
export import :pipeline_model;
export import :parameter_units;
export import :pipeline_runner;
export import :sharded_tensor;
export import :distributed_checkpoint;
export import :training_plan;
import :backend;  // internal: the MPI and NCCL implementations
