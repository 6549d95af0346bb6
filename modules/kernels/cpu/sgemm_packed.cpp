// Packed SGEMM (see sgemm_packed.h). c = alpha * a @ b + beta * c is computed in super
// blocks of a: up to kRowBlock rows by as much of the inner dimension as kPackedA allows.
//   1. the threads pack the block of a into row panels of kMR rows, kDepth deep at a time
//      (element (i, p) of a panel at p * kMR + i), so the micro-kernel reads it linearly;
//   2. c's columns are cut into tasks of kTaskCols, handed out through an atomic counter
//      (a slower core just takes fewer tasks); a task packs kDepth x kTaskCols of b into
//      column panels of kNR (element (p, j) at p * kNR + j) and sweeps all row panels of
//      a over them.
// The micro-kernel keeps a kMR x kNR tile of c in 24 zmm accumulators: each step of p
// loads two vectors of b and broadcasts kMR values of a, 24 FMAs for 14 loads. Edge tiles
// are computed whole from zero-padded panels and stored through masks.
// Buffers are thread_local and only grow: at most kPackedA floats (8 MiB) for a on
// the calling thread, kDepth x kTaskCols (192 KiB) for b per thread.
#include "sgemm_packed.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <new>

namespace infini::cpu {
namespace {

constexpr std::int64_t kMR = 12;             // rows of the register tile
constexpr std::int64_t kNR = 32;             // columns: two zmm vectors of floats
constexpr std::int64_t kDepth = 384;         // inner-dimension slice of one micro-kernel call
constexpr std::int64_t kTaskCols = 128;      // columns of c per task
constexpr std::int64_t kRowBlock = 1024;     // rows of a packed at once, at most
constexpr std::int64_t kPackedA = 1 << 21;   // floats of a packed at once, at most

// A 64-byte aligned float buffer that grows on demand and is kept for the next product.
class PackBuffer {
 public:
  // The first `count` floats, or nullptr when they cannot be allocated.
  float* reserve(std::int64_t count) noexcept {
    if (count > capacity_) {
      data_.reset(new (std::align_val_t(64), std::nothrow) float[static_cast<std::size_t>(count)]);
      capacity_ = data_ ? count : 0;
    }
    return data_.get();
  }

 private:
  struct AlignedDelete {
    void operator()(float* p) const noexcept { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<float[], AlignedDelete> data_;
  std::int64_t capacity_ = 0;
};

// Packs rows [r0, r0 + rows) (rows <= kMR) of a, depth [p0, p0 + depth), into one row
// panel; rows past `rows` are zero.
void pack_a_panel(const MatrixArg<float>& a, std::int64_t r0, std::int64_t rows, std::int64_t p0,
                  std::int64_t depth, float* panel) noexcept {
  if (a.col_major) {  // a column of the panel is contiguous in a
    for (std::int64_t p = 0; p < depth; ++p) {
      const float* src = a.data + (p0 + p) * a.ld + r0;
      for (std::int64_t i = 0; i < kMR; ++i) panel[p * kMR + i] = i < rows ? src[i] : 0.0f;
    }
    return;
  }
  for (std::int64_t i = 0; i < kMR; ++i) {
    if (i < rows) {
      const float* src = a.data + (r0 + i) * a.ld + p0;
      for (std::int64_t p = 0; p < depth; ++p) panel[p * kMR + i] = src[p];
    } else {
      for (std::int64_t p = 0; p < depth; ++p) panel[p * kMR + i] = 0.0f;
    }
  }
}

// Packs depth [p0, p0 + depth) of columns [c0, c0 + cols) of b into column panels of kNR
// (the last one zero-padded), panel after panel.
void pack_b(const MatrixArg<float>& b, std::int64_t p0, std::int64_t depth, std::int64_t c0, std::int64_t cols,
            float* dst) noexcept {
  for (std::int64_t j0 = 0; j0 < cols; j0 += kNR) {
    const std::int64_t width = std::min(kNR, cols - j0);
    float* panel = dst + j0 * depth;
    if (!b.col_major) {  // a row of the panel is contiguous in b
      for (std::int64_t p = 0; p < depth; ++p) {
        const float* src = b.data + (p0 + p) * b.ld + c0 + j0;
        if (width == kNR) {
          std::memcpy(panel + p * kNR, src, kNR * sizeof(float));
        } else {
          for (std::int64_t j = 0; j < kNR; ++j) panel[p * kNR + j] = j < width ? src[j] : 0.0f;
        }
      }
      continue;
    }
    // b transposed: strips 16 deep, so every read is a whole cache line and the writes
    // stay within 16 rows of the panel.
    for (std::int64_t p = 0; p < depth; p += 16) {
      const std::int64_t strip = std::min<std::int64_t>(16, depth - p);
      for (std::int64_t j = 0; j < kNR; ++j) {
        const float* src = b.data + (c0 + j0 + j) * b.ld + p0 + p;
        for (std::int64_t t = 0; t < strip; ++t) panel[(p + t) * kNR + j] = j < width ? src[t] : 0.0f;
      }
    }
  }
}

// c tile (rows x cols, both within the register tile) = alpha * a_panel @ b_panel + beta * c.
void micro_kernel(std::int64_t depth, const float* __restrict a, const float* __restrict b, float* c,
                  std::int64_t ldc, std::int64_t rows, std::int64_t cols, float alpha, float beta) noexcept {
  __m512 acc[kMR][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < depth; ++p) {
    const __m512 b0 = _mm512_load_ps(b + p * kNR), b1 = _mm512_load_ps(b + p * kNR + 16);
    _mm_prefetch(reinterpret_cast<const char*>(b + (p + 8) * kNR), _MM_HINT_T0);
#pragma unroll
    for (std::int64_t i = 0; i < kMR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[p * kMR + i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  const auto mask = [](std::int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1); };
  const __mmask16 m0 = mask(cols), m1 = mask(cols - 16);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (std::int64_t i = 0; i < rows; ++i) {
    float* ci = c + i * ldc;
    __m512 r0 = _mm512_mul_ps(va, acc[i][0]), r1 = _mm512_mul_ps(va, acc[i][1]);
    if (beta != 0.0f) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, ci), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, ci + 16), r1);
    }
    _mm512_mask_storeu_ps(ci, m0, r0);
    _mm512_mask_storeu_ps(ci + 16, m1, r1);
  }
}

}  // namespace

bool packed_sgemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const MatrixArg<float>& a,
                  const MatrixArg<float>& b, float beta, float* c, std::int64_t ldc, int threads) noexcept {
  // Super blocks of a: kRowBlock rows (fewer when m is) by as much depth as kPackedA allows.
  const std::int64_t max_panels = (std::min(m, kRowBlock) + kMR - 1) / kMR;
  const std::int64_t depth_block_max = std::max(kDepth, kPackedA / (max_panels * kMR) / kDepth * kDepth);
  thread_local PackBuffer a_buffer;
  float* a_packed = a_buffer.reserve(max_panels * kMR * std::min(k, depth_block_max));
  if (a_packed == nullptr) return false;
  std::atomic<bool> ok{true};
  const std::int64_t tasks = (n + kTaskCols - 1) / kTaskCols;
  for (std::int64_t r0 = 0; r0 < m; r0 += kRowBlock) {
    const std::int64_t rows = std::min(kRowBlock, m - r0), panels = (rows + kMR - 1) / kMR;
    for (std::int64_t d0 = 0; d0 < k; d0 += depth_block_max) {
      const std::int64_t depth_block = std::min(depth_block_max, k - d0);
      std::atomic<std::int64_t> next_task{0};
#pragma omp parallel num_threads(threads) if (threads > 1)
      {
        // Slice [s, s + depth) of the block lies at a_packed + s * panels * kMR.
#pragma omp for schedule(static)
        for (std::int64_t q = 0; q < panels; ++q)
          for (std::int64_t s = 0; s < depth_block; s += kDepth) {
            const std::int64_t depth = std::min(kDepth, depth_block - s);
            pack_a_panel(a, r0 + q * kMR, std::min(kMR, rows - q * kMR), d0 + s, depth,
                         a_packed + s * panels * kMR + q * kMR * depth);
          }
        thread_local PackBuffer b_buffer;
        float* b_packed = b_buffer.reserve(kDepth * kTaskCols);
        if (b_packed == nullptr) ok = false;
        for (std::int64_t task; ok && (task = next_task.fetch_add(1)) < tasks;) {
          const std::int64_t c0 = task * kTaskCols, cols = std::min(kTaskCols, n - c0);
          for (std::int64_t s = 0; s < depth_block; s += kDepth) {
            const std::int64_t depth = std::min(kDepth, depth_block - s);
            const float tile_beta = d0 + s == 0 ? beta : 1.0f;  // later slices add to c
            pack_b(b, d0 + s, depth, c0, cols, b_packed);
            const float* a_slice = a_packed + s * panels * kMR;
            for (std::int64_t q = 0; q < panels; ++q)
              for (std::int64_t j0 = 0; j0 < cols; j0 += kNR)
                micro_kernel(depth, a_slice + q * kMR * depth, b_packed + j0 * depth, c + (r0 + q * kMR) * ldc + c0 + j0,
                             ldc, std::min(kMR, rows - q * kMR), std::min(kNR, cols - j0), alpha, tile_beta);
          }
        }
      }
      if (!ok) return false;
    }
  }
  return true;
}

}  // namespace infini::cpu
#endif
