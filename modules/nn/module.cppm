// infini.nn: modules, layers, losses, optimizers, LR schedules, data and checkpoints.
export module infini.nn;
export import infini.autograd;
export import :state_dict;
export import :module_base;
export import :containers;
export import :init;
export import :linear;
export import :embedding;
export import :normalization;
export import :batch_norm;
export import :dropout;
export import :activation;
export import :flatten;
export import :conv;
export import :pooling;
export import :attention;
export import :loss;
export import :distance;
export import :data_random;
export import :dataset;
export import :sampler;
export import :prefetcher;
export import :data_loader;
export import :transforms;
export import :idx;
export import :fashion_mnist;
export import :atomic_file;
export import :safetensors;
export import :checkpoint;
export import :kv_cache;
export import :tensor_parallel;
export import :llmc_layout;
export import :model_part;
export import :causal_lm;
export import :gpt2;
export import :llama3;
export import :qwen3;
export import :state_entries;
export import :optimizer;
export import :fused_update;
export import :sgd;
export import :adam;
export import :clip_grad;
export import :grad_scaler;
export import :lr_scheduler;
export import :llmc_checkpoint;
export import :hf_model;
export import :llmc_tokens;
export import :llmc_tokenizer;
export import :tokenizer;
export import :lora;
export import :pretrained;
export import :model_family;
import :safetensors_header;  // internal to the safetensors reader and writer
import :layer_errors;  // internal to the layers' forward
import :spatial_options;  // internal to the conv and pooling layers
import :llmc_detail;  // internal to llm.c's file readers and writers
import :hf_directory;  // internal to the Hugging Face mappings
