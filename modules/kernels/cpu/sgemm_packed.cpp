// Packed SGEMM (see sgemm_packed.h). c = alpha * a @ b + beta * c is computed in super
// blocks of a: up to kRowBlock rows by as much of the inner dimension as kPackedA allows.
//   1. the threads pack the block of a into row panels of kMR rows, Format::kDepth deep at
//      a time, so the micro-kernel reads them linearly;
//   2. c's columns are cut into tasks of kTaskCols, handed out through an atomic counter
//      (a slower core just takes fewer tasks); a task packs Format::kDepth x kTaskCols of b
//      into column panels of kNR and sweeps all row panels of a over them.
// The Format (sgemm_panels.h) says what a panel word is: a float (Float32Panels, one FMA
// per step) or a pair of bfloat16 (Bf16PairPanels, kMedium's rounded operands, one
// VDPBF16PS per step, twice as deep).
// The micro-kernel keeps a kMR x kNR tile of c in 24 zmm accumulators: each step loads two
// vectors of b and broadcasts kMR words of a, 24 multiply-adds for 14 loads. Edge tiles
// are computed from zero-padded panels and stored through masks.
// Packing is where the time outside the micro-kernel goes, mostly waiting on memory:
// - b is read from rows all over the matrix, which the hardware prefetchers do not
//   follow; so while a block of b is being used, the micro-kernels prefetch the next one
//   into L2, one line every 8 steps (a thread claims its next task early to know it);
// - transposed operands are packed by 16 x 16 in-register transposes, and a column-major
//   a is read along its contiguous columns.
// Buffers are thread_local and only grow: at most kPackedA words (8 MiB) for a on
// the calling thread, 192 KiB for b per thread.
#include "sgemm_packed.h"
#include "pack_buffer.h"
#include "gemm_simd.h"
#include "sgemm_panels.h"

bool infini::cpu::packed_bf16_built() noexcept { return kHasPackedBf16; }

#if defined(__AVX512F__)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace infini::cpu {
namespace {

using panels::kMR;
using panels::kNR;
constexpr std::int64_t kTaskCols = 128;   // columns of c per task
constexpr std::int64_t kRowBlock = 1024;  // rows of a packed at once, at most
constexpr std::int64_t kPackedA = 1 << 21;  // words of a packed at once, at most

// Words of a panel `depth` deep, one per step.
template <class Format>
constexpr std::int64_t steps_of(std::int64_t depth) {
  return (depth + Format::kDepthPerWord - 1) / Format::kDepthPerWord;
}

// Packs the super block rows [r0, r0 + rows) x depth [d0, d0 + depth_block) of a into
// `panels` row panels, slice after slice of Format::kDepth (see packed_gemm). Called inside
// a parallel region: the threads share the work. A column-major a is read along its
// contiguous columns, each one spread over all panels, so the reads stream.
template <class Format>
void pack_a_block(const MatrixArg<float>& a, std::int64_t r0, std::int64_t rows, std::int64_t d0,
                  std::int64_t depth_block, std::int64_t panels, typename Format::Word* a_packed) noexcept {
  // Slice [s, s + depth) lies at a_packed + steps(s) * panels * kMR, panel q of it
  // kMR * steps(depth) further on.
  constexpr std::int64_t kDepth = Format::kDepth;
  if (a.col_major) {
#pragma omp for schedule(static)
    for (std::int64_t p = 0; p < depth_block; ++p) {
      const std::int64_t s = p / kDepth * kDepth, depth = std::min(kDepth, depth_block - s);
      Format::pack_a_column(a.data + (d0 + p) * a.ld + r0, a.ld, rows, p - s, depth, panels,
                            a_packed + steps_of<Format>(s) * panels * kMR);
    }
    return;
  }
#pragma omp for schedule(static)
  for (std::int64_t q = 0; q < panels; ++q)
    for (std::int64_t s = 0; s < depth_block; s += kDepth) {
      const std::int64_t depth = std::min(kDepth, depth_block - s);
      Format::pack_a_panel(a, r0 + q * kMR, std::min(kMR, rows - q * kMR), d0 + s, depth,
                           a_packed + steps_of<Format>(s) * panels * kMR + q * kMR * steps_of<Format>(depth));
    }
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

// c tile (rows x cols, rows <= kRows <= kMR, cols <= kNR) = alpha * a_panel @ b_panel + beta * c,
// `steps` words deep. Computes kRows rows of the panel: a last panel of 4 rows (m = 256,
// 1024) is not paid as 12.
template <class Format, std::int64_t kRows>
void micro_kernel(std::int64_t steps, const typename Format::Word* __restrict a,
                  const typename Format::Word* __restrict b, float* c, std::int64_t ldc, std::int64_t rows,
                  std::int64_t cols, float alpha, float beta, LineCursor next) noexcept {
  __m512 acc[kRows][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  for (std::int64_t t = 0; t < steps; ++t) {
    const __m512 b0 = Format::load(b + t * kNR), b1 = Format::load(b + t * kNR + 16);
    _mm_prefetch(reinterpret_cast<const char*>(b + (t + 8) * kNR), _MM_HINT_T0);
    if ((t & 7) == 0) next.prefetch_next();
#pragma unroll
    for (std::int64_t i = 0; i < kRows; ++i) {
      const __m512 ai = Format::broadcast(a + t * kMR + i);
      acc[i][0] = Format::madd(acc[i][0], ai, b0);
      acc[i][1] = Format::madd(acc[i][1], ai, b1);
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
// the packed a slice times every column panel of the packed b block, `steps` words deep.
// The micro-kernels share the prefetching of `next` between them.
template <class Format>
void sweep(const typename Format::Word* a_slice, std::int64_t rows, const typename Format::Word* b_block,
           std::int64_t steps, std::int64_t cols, float* c, std::int64_t ldc, float alpha, float beta,
           const BlockLines& next) noexcept {
  const std::int64_t panels = (rows + kMR - 1) / kMR, col_panels = (cols + kNR - 1) / kNR;
  const std::int64_t calls = panels * col_panels;
  for (std::int64_t q = 0; q < panels; ++q)
    for (std::int64_t j = 0; j < col_panels; ++j) {
      const std::int64_t call = q * col_panels + j;
      const std::int64_t tile_rows = std::min(kMR, rows - q * kMR);
      const auto kernel = tile_rows > 8   ? micro_kernel<Format, 12>
                          : tile_rows > 4 ? micro_kernel<Format, 8>
                                          : micro_kernel<Format, 4>;
      kernel(steps, a_slice + q * kMR * steps, b_block + j * kNR * steps, c + q * kMR * ldc + j * kNR, ldc, tile_rows,
             std::min(kNR, cols - j * kNR), alpha, beta,
             LineCursor(next, call * next.count / calls, (call + 1) * next.count / calls));
    }
}

template <class Format>
bool packed_gemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const MatrixArg<float>& a,
                 const MatrixArg<float>& b, float beta, float* c, std::int64_t ldc, int threads) noexcept {
  using Word = typename Format::Word;
  constexpr std::int64_t kDepth = Format::kDepth;
  // Super blocks of a: kRowBlock rows (fewer when m is) by as much depth as kPackedA allows.
  const std::int64_t max_panels = (std::min(m, kRowBlock) + kMR - 1) / kMR;
  const std::int64_t depth_block_max =
      std::max(kDepth, kPackedA * Format::kDepthPerWord / (max_panels * kMR) / kDepth * kDepth);
  thread_local PackBuffer<Word> a_buffer;
  Word* a_packed = a_buffer.reserve(max_panels * kMR * steps_of<Format>(std::min(k, depth_block_max)));
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
        pack_a_block<Format>(a, r0, rows, d0, depth_block, panels, a_packed);  // ends with a barrier
        thread_local PackBuffer<Word> b_buffer;
        Word* b_packed = b_buffer.reserve(steps_of<Format>(kDepth) * kTaskCols);
        if (b_packed == nullptr) ok = false;
        std::int64_t task = next_task.fetch_add(1);
        while (ok && task < tasks) {
          const std::int64_t next = next_task.fetch_add(1);  // claimed now to prefetch its b
          const std::int64_t c0 = task * kTaskCols, cols = std::min(kTaskCols, n - c0);
          for (std::int64_t s = 0; s < depth_block; s += kDepth) {
            const std::int64_t depth = std::min(kDepth, depth_block - s);
            const float tile_beta = d0 + s == 0 ? beta : 1.0f;  // later slices add to c
            Format::pack_b(b, d0 + s, depth, c0, cols, b_packed);
            // The block packed next: this task's next slice, or the next task's first.
            const bool last = s + kDepth >= depth_block;
            const std::int64_t next_s = last ? 0 : s + kDepth, next_c0 = last ? next * kTaskCols : c0;
            const std::int64_t next_depth = std::min(kDepth, depth_block - next_s);
            const std::int64_t next_cols = std::min(kTaskCols, n - next_c0);
            const BlockLines next_lines = !last || next < tasks ? BlockLines(b, d0 + next_s, next_depth, next_c0, next_cols) : BlockLines();
            sweep<Format>(a_packed + steps_of<Format>(s) * panels * kMR, rows, b_packed, steps_of<Format>(depth), cols,
                          c + r0 * ldc + c0, ldc, alpha, tile_beta, next_lines);
          }
          task = next;
        }
      }
      if (!ok) return false;
    }
  }
  return true;
}

}  // namespace

bool packed_sgemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const MatrixArg<float>& a,
                  const MatrixArg<float>& b, float beta, float* c, std::int64_t ldc, int threads,
                  bool bf16_operands) noexcept {
#if defined(__AVX512BF16__)
  if (bf16_operands) return packed_gemm<panels::Bf16PairPanels>(m, n, k, alpha, a, b, beta, c, ldc, threads);
#endif
  (void)bf16_operands;
  return packed_gemm<panels::Float32Panels>(m, n, k, alpha, a, b, beta, c, ldc, threads);
}

}  // namespace infini::cpu
#endif
