// Plain C++ interface to the CUDA indexing kernels: the index range check, gather / scatter
// along one dim, sort, top-k, unique, nonzero, and the index-table gather and its adjoint
// scatter-add of the shape family. Every result is written in a fixed order, so two runs
// give the same bits (no floating-point atomics anywhere).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "infini/cuda/cuda.h"
#include "infini/op_lists.h"

namespace infini::cuda {

// Device memory for one call's temporaries: `bytes` (> 0) on the call's device, valid until
// the call returns. Later kernels are ordered after the call's on the one stream, so the
// caller may reuse the memory as soon as the call has returned.
using DeviceAlloc = std::function<void*(std::size_t bytes)>;

// infini::ScatterMode: one list (op_lists.h).
enum class ScatterMode : std::uint8_t { INFINI_SCATTER_MODES(INFINI_ENUM_ENTRY) };

// The first element (row-major order) of `index` (int64) outside [lo, hi): true and *bad
// set to its value, or false. Waits for the answer.
bool index_outside(const StridedArray& index, std::int64_t lo, std::int64_t hi, std::int64_t* bad,
                   const DeviceAlloc& alloc, int device);

// out[p] = self[p with coordinate `dim` replaced by index[p]] (a negative index counts from
// the end of self's dim). out and index (int64) share sizes; self has them too except along
// dim; every index lies in [-self.sizes[dim], self.sizes[dim]). Any dtype.
void gather(const StridedArray& out, const StridedArray& self, int dim, const StridedArray& index, int device);

// self[p with `dim` replaced by index[p]] = mode(that element, src[p]) over index's sizes,
// at each position in index order (Copy: the last update wins). index (int64) and src
// (self's type) share sizes; self has them too except along dim and has no two elements at
// one address. f16/bf16 combine in float, rounded once per update; integers wrap.
void scatter(const StridedArray& self, int dim, const StridedArray& index, const StridedArray& src, ScatterMode mode,
             const DeviceAlloc& alloc, int device);

// indices (int64, self's sizes): the stable order of each slice of self along dim,
// ascending or descending, NaN above every number and -0 equal to +0.
void sort(const StridedArray& indices, const StridedArray& self, int dim, bool descending, const DeviceAlloc& alloc,
          int device);

// indices (int64, self's sizes with k along dim): the positions of the k largest (or
// smallest) elements of each slice, NaN above every number, equal values by lower position;
// best first when `sorted`, else in ascending position order.
void topk(const StridedArray& indices, const StridedArray& self, int dim, std::int64_t k, bool largest, bool sorted,
          const DeviceAlloc& alloc, int device);

// unique: `outputs(groups)` is called once the number of distinct values is known and
// returns where values (`groups` elements of x's type) and counts (int64) go.
struct UniqueBuffers {
  void* values = nullptr;
  std::int64_t* counts = nullptr;
};
// The distinct values of the n contiguous elements at x (NaNs all distinct), ascending when
// `sorted`, else in order of first occurrence; inverse[i] (int64, n) is the output position
// of x[i]'s value, counts how often each value occurs.
void unique(const void* x, ElementType type, std::int64_t n, bool sorted, std::int64_t* inverse,
            const std::function<UniqueBuffers(std::int64_t groups)>& outputs, const DeviceAlloc& alloc, int device);

// The coordinates of the nonzero elements (NaN counts as nonzero) of the contiguous array
// `self` (its strides are ignored), in row-major order: `output(count)` is called once the
// count is known and returns a contiguous int64 (count, self.ndim) buffer to fill.
void nonzero(const StridedArray& self, const std::function<std::int64_t*(std::int64_t count)>& output,
             const DeviceAlloc& alloc, int device);

// out (contiguous) [j_0, ..., j_n] = in element at offset sum_d offsets[base_d + j_d], where
// base_d = out.sizes[0] + ... + out.sizes[d - 1]: `offsets` (host, that many int64) holds,
// for every dim in turn, the element offset each output index of that dim adds. `table` is
// device memory for a copy of it. Any dtype.
void gather_dims(const StridedArray& out, const StridedArray& in, const std::int64_t* offsets, std::int64_t* table,
                 int device);

// in (outer, m, inner) -> out (outer, n, inner), both contiguous of one type: out row (o, i)
// sums, in ascending j, the in rows (o, j) listed as sources[starts[i] .. starts[i + 1]),
// in double (floating point) or int64 (integers), rounded once; zero where none.
// starts (n + 1 entries) and sources (m) are host arrays; `table` is device memory for
// n + 1 + m int64.
void scatter_add_dim(void* out, const void* in, ElementType type, std::int64_t outer, std::int64_t m, std::int64_t n,
                     std::int64_t inner, const std::int64_t* starts, const std::int64_t* sources, std::int64_t* table,
                     int device);

}  // namespace infini::cuda
