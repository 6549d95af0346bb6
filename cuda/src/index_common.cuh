// Internal to the indexing kernels: several arrays of one shape coalesced together (walked
// with strided.cuh's offsets_of), dims taken out of a shape, and CUB calls with their
// temporary storage from a DeviceAlloc.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "check.cuh"
#include "infini/cuda/cuda.h"
#include "infini/cuda/index.h"
#include "launch.cuh"
#include "strided.cuh"

namespace infini::cuda::detail {

// The arrays (one shape), coalesced together, as one SharedShape<N>.
template <int N>
SharedShape<N> joint_strides(std::initializer_list<StridedArray> arrays) {
  StridedArray copies[N];
  std::copy(arrays.begin(), arrays.end(), copies);
  if constexpr (N == 1) coalesce({&copies[0]});
  else if constexpr (N == 2) coalesce({&copies[0], &copies[1]});
  else coalesce({&copies[0], &copies[1], &copies[2]});
  const StridedArray* coalesced[N];
  for (int k = 0; k < N; ++k) coalesced[k] = &copies[k];
  return shared_shape(coalesced);
}

// a with dim `dim` taken out (its elements at coordinate 0 of that dim).
inline StridedArray without_dim(const StridedArray& a, int dim) {
  StridedArray out = a;
  out.ndim = a.ndim - 1;
  for (int d = dim; d < out.ndim; ++d) {
    out.sizes[d] = a.sizes[d + 1];
    out.strides[d] = a.strides[d + 1];
  }
  return out;
}

// a with dim `dim` moved last: row-major order walks each slice along dim contiguously.
inline StridedArray dim_last(const StridedArray& a, int dim) {
  StridedArray out = without_dim(a, dim);
  out.sizes[out.ndim] = a.sizes[dim];
  out.strides[out.ndim] = a.strides[dim];
  ++out.ndim;
  return out;
}

// Runs a CUB device algorithm: call(temp, bytes) once to size its temporary storage and
// once to run it on stream(); `what` names it in errors.
template <class Call>
void cub_run(const DeviceAlloc& alloc, const char* what, Call&& call) {
  std::size_t bytes = 0;
  check(call(static_cast<void*>(nullptr), bytes), what);
  void* temp = alloc(std::max<std::size_t>(bytes, 1));
  check(call(temp, bytes), what);
}

// Typed scratch of n elements (n may be 0).
template <class T>
T* scratch(const DeviceAlloc& alloc, std::int64_t n) {
  return static_cast<T*>(alloc(std::max<std::size_t>(static_cast<std::size_t>(n) * sizeof(T), 1)));
}

// Waits for the stream and copies `count` T from device memory at src to dst.
template <class T>
void read_back(T* dst, const T* src, std::size_t count, const char* what) {
  refuse_capture(what, "the op sizes its result by a value it reads back from the GPU");
  check(cudaMemcpyAsync(dst, src, count * sizeof(T), cudaMemcpyDeviceToHost, stream()), what);
  check(cudaStreamSynchronize(stream()), what);
}

// The number of low bits that hold every value in [0, max] (at least 1).
inline int bits_for(std::uint64_t max) {
  int bits = 1;
  while (bits < 64 && (max >> bits) != 0) ++bits;
  return bits;
}

}  // namespace infini::cuda::detail
