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
// Packing is where the time outside the micro-kernel goes, mostly waiting on memory:
// - b is read from rows all over the matrix, which the hardware prefetchers do not
//   follow; so while a block of b is being used, the micro-kernels prefetch the next one
//   into L2, one line every 8 steps (a thread claims its next task early to know it);
// - transposed operands are packed by 16 x 16 in-register transposes, and a column-major
//   a is read along its contiguous columns.
// Buffers are thread_local and only grow: at most kPackedA floats (8 MiB) for a on
// the calling thread, kDepth x kTaskCols (192 KiB) for b per thread.
#include "sgemm_packed.h"
#include "pack_buffer.h"
#include "gemm_simd.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace infini::cpu {
namespace {

constexpr std::int64_t kMR = 12;             // rows of the register tile (a multiple of 4, see sweep)
constexpr std::int64_t kNR = 32;             // columns: two zmm vectors of floats
constexpr std::int64_t kDepth = 384;         // inner-dimension slice of one micro-kernel call
constexpr std::int64_t kTaskCols = 128;      // columns of c per task
constexpr std::int64_t kRowBlock = 1024;     // rows of a packed at once, at most
constexpr std::int64_t kPackedA = 1 << 21;   // floats of a packed at once, at most

constexpr __mmask16 kPanelRow = (1u << kMR) - 1;  // kMR floats of a 16-lane store

// Packs rows [r0, r0 + rows) (rows <= kMR) of a row-major a, depth [p0, p0 + depth), into
// one row panel; rows past `rows` are zero. Transposes 16 deep at a time.
void pack_a_panel(const MatrixArg<float>& a, std::int64_t r0, std::int64_t rows, std::int64_t p0,
                  std::int64_t depth, float* panel) noexcept {
  __m512 column[16];
  for (std::int64_t p = 0; p < depth; p += 16) {
    const std::int64_t strip = std::min<std::int64_t>(16, depth - p);
    load_transposed(a.data + r0 * a.ld + p0 + p, a.ld, rows, strip, column);
    for (std::int64_t t = 0; t < strip; ++t) _mm512_mask_storeu_ps(panel + (p + t) * kMR, kPanelRow, column[t]);
  }
}

// Packs the super block rows [r0, r0 + rows) x depth [d0, d0 + depth_block) of a into
// `panels` row panels, slice after slice of kDepth (see packed_sgemm). Called inside a
// parallel region: the threads share the work. A column-major a is read along its
// contiguous columns, each one spread over all panels, so the reads stream.
void pack_a_block(const MatrixArg<float>& a, std::int64_t r0, std::int64_t rows, std::int64_t d0,
                  std::int64_t depth_block, std::int64_t panels, float* a_packed) noexcept {
  // Slice [s, s + depth) lies at a_packed + s * panels * kMR, panel q of it kMR * depth further on.
  if (a.col_major) {
#pragma omp for schedule(static)
    for (std::int64_t p = 0; p < depth_block; ++p) {
      const std::int64_t s = p / kDepth * kDepth, depth = std::min(kDepth, depth_block - s);
      const float* src = a.data + (d0 + p) * a.ld + r0;
      float* dst = a_packed + s * panels * kMR + (p - s) * kMR;
      for (std::int64_t q = 0; q < panels; ++q) {
        const std::int64_t valid = std::min(kMR, rows - q * kMR);
        const __m512 column = _mm512_maskz_loadu_ps(first_lanes(valid), src + q * kMR);
        _mm512_mask_storeu_ps(dst + q * kMR * depth, kPanelRow, column);
      }
    }
    return;
  }
#pragma omp for schedule(static)
  for (std::int64_t q = 0; q < panels; ++q)
    for (std::int64_t s = 0; s < depth_block; s += kDepth) {
      const std::int64_t depth = std::min(kDepth, depth_block - s);
      pack_a_panel(a, r0 + q * kMR, std::min(kMR, rows - q * kMR), d0 + s, depth,
                   a_packed + s * panels * kMR + q * kMR * depth);
    }
}

// Packs depth [p0, p0 + depth) of columns [c0, c0 + cols) of b into column panels of kNR
// (the last one zero-padded), panel after panel.
void pack_b(const MatrixArg<float>& b, std::int64_t p0, std::int64_t depth, std::int64_t c0, std::int64_t cols,
            float* dst) noexcept {
  if (!b.col_major) {  // row p of the block is contiguous in b: read it whole, in order
    for (std::int64_t p = 0; p < depth; ++p) {
      const float* src = b.data + (p0 + p) * b.ld + c0;
      for (std::int64_t j0 = 0; j0 < cols; j0 += kNR) {
        const std::int64_t width = std::min(kNR, cols - j0);
        float* row = dst + j0 * depth + p * kNR;
        if (width == kNR) {
          std::memcpy(row, src + j0, kNR * sizeof(float));
        } else {
          for (std::int64_t j = 0; j < kNR; ++j) row[j] = j < width ? src[j0 + j] : 0.0f;
        }
      }
    }
    return;
  }
  // b transposed: column j of the block is row c0 + j of b's storage; transpose 16 x 16
  // blocks into the panels.
  __m512 row[16];
  for (std::int64_t j0 = 0; j0 < cols; j0 += 16) {
    float* panel = dst + j0 / kNR * kNR * depth + j0 % kNR;
    for (std::int64_t p = 0; p < depth; p += 16) {
      const std::int64_t strip = std::min<std::int64_t>(16, depth - p);
      load_transposed(b.data + (c0 + j0) * b.ld + p0 + p, b.ld, std::min<std::int64_t>(16, cols - j0), strip, row);
      for (std::int64_t t = 0; t < strip; ++t) _mm512_store_ps(panel + (p + t) * kNR, row[t]);
    }
  }
  // A last panel half past `cols` is read by the micro-kernel: zero it.
  if (const std::int64_t half = (cols + 15) / 16 * 16; half % kNR != 0)
    for (std::int64_t p = 0; p < depth; ++p) _mm512_store_ps(dst + half / kNR * kNR * depth + p * kNR + 16, _mm512_setzero_ps());
}

// The cache lines of b that pack_b(b, p0, depth, c0, cols) will read, row by row of b's
// storage: the micro-kernels prefetch them into L2 a few at a time while they compute, so
// that packing the next block finds them there.
struct BlockLines {
  const float* base = nullptr;
  std::int64_t ld = 0, width = 1, count = 0;  // width: lines per stored row

  BlockLines() = default;
  BlockLines(const MatrixArg<float>& b, std::int64_t p0, std::int64_t depth, std::int64_t c0, std::int64_t cols) noexcept
      : base(b.col_major ? b.data + c0 * b.ld + p0 : b.data + p0 * b.ld + c0),
        ld(b.ld),
        width(((b.col_major ? depth : cols) + 15) / 16),
        count((b.col_major ? cols : depth) * width) {}
};

// Walks lines [first, last) of a BlockLines.
class LineCursor {
 public:
  LineCursor(const BlockLines& lines, std::int64_t first, std::int64_t last) noexcept
      : row_(lines.base + first / lines.width * lines.ld), column_(first % lines.width), left_(last - first),
        width_(lines.width), ld_(lines.ld) {}
  // Prefetches the next line into L2, if any is left.
  void prefetch_next() noexcept {
    if (left_ <= 0) return;
    _mm_prefetch(reinterpret_cast<const char*>(row_ + column_ * 16), _MM_HINT_T1);
    --left_;
    if (++column_ == width_) {
      column_ = 0;
      row_ += ld_;
    }
  }

 private:
  const float* row_;
  std::int64_t column_, left_, width_, ld_;
};

// c tile (rows x cols, rows <= kRows <= kMR, cols <= kNR) = alpha * a_panel @ b_panel + beta * c.
// Computes kRows rows of the panel: a last panel of 4 rows (m = 256, 1024) is not paid as 12.
template <std::int64_t kRows>
void micro_kernel(std::int64_t depth, const float* __restrict a, const float* __restrict b, float* c,
                  std::int64_t ldc, std::int64_t rows, std::int64_t cols, float alpha, float beta,
                  LineCursor next) noexcept {
  __m512 acc[kRows][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < depth; ++p) {
    const __m512 b0 = _mm512_load_ps(b + p * kNR), b1 = _mm512_load_ps(b + p * kNR + 16);
    _mm_prefetch(reinterpret_cast<const char*>(b + (p + 8) * kNR), _MM_HINT_T0);
    if ((p & 7) == 0) next.prefetch_next();
#pragma unroll
    for (std::int64_t i = 0; i < kRows; ++i) {
      const __m512 ai = _mm512_set1_ps(a[p * kMR + i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  const auto store_row = [&](std::int64_t i) { store_scaled_row(c + i * ldc, cols, acc[i][0], acc[i][1], alpha, beta); };
  if (rows == kRows) {  // unrolled, so the accumulators stay in registers
#pragma unroll
    for (std::int64_t i = 0; i < kRows; ++i) store_row(i);
  } else {
    for (std::int64_t i = 0; i < rows; ++i) store_row(i);
  }
}

// c block (rows x cols) = alpha * a_slice @ b_block + beta * c block: every row panel of
// the packed a slice times every column panel of the packed b block, `depth` deep. The
// micro-kernels share the prefetching of `next` between them.
void sweep(const float* a_slice, std::int64_t rows, const float* b_block, std::int64_t depth, std::int64_t cols,
           float* c, std::int64_t ldc, float alpha, float beta, const BlockLines& next) noexcept {
  const std::int64_t panels = (rows + kMR - 1) / kMR, col_panels = (cols + kNR - 1) / kNR;
  const std::int64_t calls = panels * col_panels;
  for (std::int64_t q = 0; q < panels; ++q)
    for (std::int64_t j = 0; j < col_panels; ++j) {
      const std::int64_t call = q * col_panels + j;
      const std::int64_t tile_rows = std::min(kMR, rows - q * kMR);
      const auto kernel = tile_rows > 8 ? micro_kernel<12> : tile_rows > 4 ? micro_kernel<8> : micro_kernel<4>;
      kernel(depth, a_slice + q * kMR * depth, b_block + j * kNR * depth, c + q * kMR * ldc + j * kNR, ldc, tile_rows,
             std::min(kNR, cols - j * kNR), alpha, beta,
             LineCursor(next, call * next.count / calls, (call + 1) * next.count / calls));
    }
}

}  // namespace

bool packed_sgemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const MatrixArg<float>& a,
                  const MatrixArg<float>& b, float beta, float* c, std::int64_t ldc, int threads) noexcept {
  // Super blocks of a: kRowBlock rows (fewer when m is) by as much depth as kPackedA allows.
  const std::int64_t max_panels = (std::min(m, kRowBlock) + kMR - 1) / kMR;
  const std::int64_t depth_block_max = std::max(kDepth, kPackedA / (max_panels * kMR) / kDepth * kDepth);
  thread_local PackBuffer<float> a_buffer;
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
        pack_a_block(a, r0, rows, d0, depth_block, panels, a_packed);  // ends with a barrier
        thread_local PackBuffer<float> b_buffer;
        float* b_packed = b_buffer.reserve(kDepth * kTaskCols);
        if (b_packed == nullptr) ok = false;
        std::int64_t task = next_task.fetch_add(1);
        while (ok && task < tasks) {
          const std::int64_t next = next_task.fetch_add(1);  // claimed now to prefetch its b
          const std::int64_t c0 = task * kTaskCols, cols = std::min(kTaskCols, n - c0);
          for (std::int64_t s = 0; s < depth_block; s += kDepth) {
            const std::int64_t depth = std::min(kDepth, depth_block - s);
            const float tile_beta = d0 + s == 0 ? beta : 1.0f;  // later slices add to c
            pack_b(b, d0 + s, depth, c0, cols, b_packed);
            // The block packed next: this task's next slice, or the next task's first.
            const bool last = s + kDepth >= depth_block;
            const std::int64_t next_s = last ? 0 : s + kDepth, next_c0 = last ? next * kTaskCols : c0;
            const std::int64_t next_depth = std::min(kDepth, depth_block - next_s);
            const std::int64_t next_cols = std::min(kTaskCols, n - next_c0);
            const BlockLines next_lines = !last || next < tasks ? BlockLines(b, d0 + next_s, next_depth, next_c0, next_cols) : BlockLines();
            sweep(a_packed + s * panels * kMR, rows, b_packed, depth, cols, c + r0 * ldc + c0, ldc, alpha, tile_beta,
                  next_lines);
          }
          task = next;
        }
      }
      if (!ok) return false;
    }
  }
  return true;
}

}  // namespace infini::cpu
#endif
