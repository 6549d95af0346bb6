// Test helpers: reading a tensor's elements without going through the op under test.
#pragma once

#include <cstdint>
#include <vector>
import infini.tensor;

namespace infini::test {

// The elements of a contiguous CPU tensor of element type T, in order.
template <class T>
std::vector<T> contiguous_values(const Tensor& t) {
  const T* p = t.data_ptr<T>();
  return std::vector<T>(p, p + t.numel());
}

// Element [i][j] of a 2-d CPU tensor, read through its strides from the storage.
template <class T>
T at(const Tensor& t, std::int64_t i, std::int64_t j) {
  return static_cast<const T*>(t.storage().data())[t.storage_offset() + i * t.stride(0) + j * t.stride(1)];
}

}  // namespace infini::test
