// AMX GEMM with bfloat16 operands (see sgemm_amx.h). The same blocking as the packed
// SGEMM (sgemm_packed.cpp), with AMX tiles for the micro-kernel:
//   1. the threads pack a super block of a (up to kRowBlock rows, kDepth deep) into row
//      panels of 32 rows, rounding to bfloat16: for each 32-deep step, a tile of rows
//      0-15 then one of rows 16-31, each 16 rows of 32 bfloat16 (64 bytes);
//   2. c's columns are cut into tasks of kTaskCols handed out through an atomic counter;
//      a task packs its columns of b into column panels of 32: for each 32-deep step, a
//      tile of columns 0-15 then one of 16-31, each 16 rows of pairs: row r holds
//      (b(2r, j), b(2r + 1, j)) for its 16 columns j, the layout TDPBF16PS reads.
// The micro-kernel keeps a 32 x 32 block of c in four float32 tiles (tmm0-3) and per
// 32-deep step loads two tiles of a (tmm4-5) and two of b (tmm6-7) for four TDPBF16PS.
// Edges are zero-padded in the panels (rows, columns and depth), so the products are
// always whole; the block goes to c through a buffer, or straight to c when it is whole
// and alpha == 1, beta is 0 or 1.
#include "sgemm_amx.h"

#include <sys/syscall.h>
#include <unistd.h>

bool infini::cpu::amx_bf16_ready() noexcept {
  if constexpr (!kHasAmxBf16) return false;
  // Linux keeps the tile state off until a process asks for it (arch_prctl(2)).
  constexpr long kRequestPermission = 0x1023, kTileData = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
  static const bool ready = syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
  return ready;
}

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>

#include "pack_buffer.h"
#include "gemm_simd.h"

namespace infini::cpu {
namespace {

using bf16 = std::uint16_t;

constexpr std::int64_t kBlock = 32;        // rows (and columns) of c per micro-kernel
constexpr std::int64_t kStep = 32;         // depth of one tile product
constexpr std::int64_t kTileElems = 512;   // bfloat16 in a tile: 16 rows of 64 bytes
constexpr std::int64_t kDepth = 1536;      // depth of a super block, a multiple of kStep
constexpr std::int64_t kTaskCols = 128;    // columns of c per task
constexpr std::int64_t kRowBlock = 1024;   // rows of a packed at once, at most

std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

// Every tile 16 rows of 64 bytes (palette 1).
void configure_tiles() noexcept {
  struct alignas(64) {
    std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
    std::uint16_t bytes_per_row[16] = {};
    std::uint8_t rows[16] = {};
  } config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

// 32 float32 lanes (lo then hi) rounded to bfloat16, in order.
__m512i to_bf16(__m512 lo, __m512 hi) noexcept { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }

// Packs rows [r0, r0 + rows) (rows <= 32) of a, depth [p0, p0 + depth), into one row
// panel of round_up(depth, kStep) / kStep steps; rows and depth past the ends are zero.
void pack_a_panel(const MatrixArg<float>& a, std::int64_t r0, std::int64_t rows, std::int64_t p0,
                  std::int64_t depth, bf16* panel) noexcept {
  for (std::int64_t s = 0; s < depth; s += kStep, panel += 2 * kTileElems) {
    const __mmask16 lo = first_lanes(depth - s), hi = first_lanes(depth - s - 16);
    if (!a.col_major) {  // a tile row is a run of a's row
      for (std::int64_t i = 0; i < kBlock; ++i) {
        const float* src = a.data + (r0 + i) * a.ld + p0 + s;
        const __m512i row = i < rows ? to_bf16(_mm512_maskz_loadu_ps(lo, src), _mm512_maskz_loadu_ps(hi, src + 16))
                                     : _mm512_setzero_si512();
        _mm512_store_si512(panel + i * kStep, row);
      }
      continue;
    }
    // Column-major: transpose 16 x 16 blocks (rows of a across, depth down).
    for (std::int64_t h = 0; h < kBlock; h += 16) {
      __m512 first[16], second[16];  // depth s .. s+15 and s+16 .. s+31 of 16 rows
      const float* src = a.data + (p0 + s) * a.ld + r0 + h;
      load_transposed(src, a.ld, depth - s, rows - h, first);
      load_transposed(src + 16 * a.ld, a.ld, depth - s - 16, rows - h, second);
      for (std::int64_t i = 0; i < 16; ++i) _mm512_store_si512(panel + (h + i) * kStep, to_bf16(first[i], second[i]));
    }
  }
}

// Packs columns [c0, c0 + cols) (cols <= 32) of b, depth [p0, p0 + depth), into one
// column panel of pairs; columns and depth past the ends are zero.
void pack_b_panel(const MatrixArg<float>& b, std::int64_t p0, std::int64_t depth, std::int64_t c0, std::int64_t cols,
                  bf16* panel) noexcept {
  // Interleaves two runs of 16 bfloat16 (lanes 0-15 and 16-31) into 16 pairs.
  static const __m512i kPairs = [] {
    alignas(64) std::int16_t index[32];
    for (int j = 0; j < 16; ++j) index[2 * j] = static_cast<std::int16_t>(j), index[2 * j + 1] = static_cast<std::int16_t>(16 + j);
    return _mm512_load_si512(index);
  }();
  for (std::int64_t s = 0; s < depth; s += kStep, panel += 2 * kTileElems) {
    for (std::int64_t h = 0; h < kBlock; h += 16) {
      bf16* tile = panel + h / 16 * kTileElems;
      if (!b.col_major) {  // rows 2r and 2r + 1 of b, 16 columns each, make tile row r
        const __mmask16 width = first_lanes(cols - h);
        for (std::int64_t r = 0; r < 16; ++r) {
          const std::int64_t p = s + 2 * r;
          const float* src = b.data + (p0 + p) * b.ld + c0 + h;
          const __m512 even = p < depth ? _mm512_maskz_loadu_ps(width, src) : _mm512_setzero_ps();
          const __m512 odd = p + 1 < depth ? _mm512_maskz_loadu_ps(width, src + b.ld) : _mm512_setzero_ps();
          _mm512_store_si512(tile + r * kStep, _mm512_permutexvar_epi16(kPairs, to_bf16(even, odd)));
        }
        continue;
      }
      // b transposed: column j's 32-deep run is contiguous and, rounded, holds its 16
      // pairs in order; a 16 x 16 transpose of the pairs gives the tile rows.
      const __mmask16 lo = first_lanes(depth - s), hi = first_lanes(depth - s - 16);
      __m512 pairs[16];
      for (std::int64_t j = 0; j < 16; ++j) {
        const float* src = b.data + (c0 + h + j) * b.ld + p0 + s;
        pairs[j] = h + j < cols ? _mm512_castsi512_ps(to_bf16(_mm512_maskz_loadu_ps(lo, src),
                                                                    _mm512_maskz_loadu_ps(hi, src + 16)))
                                : _mm512_setzero_ps();
      }
      transpose16x16(pairs);
      for (std::int64_t r = 0; r < 16; ++r) _mm512_store_ps(reinterpret_cast<float*>(tile + r * kStep), pairs[r]);
    }
  }
}

// c block (rows x cols <= 32 x 32) = alpha * a_panel @ b_panel + beta * c, `steps` tile
// steps deep. `buffer` holds 32 x 32 floats.
void micro_kernel(std::int64_t steps, const bf16* a, const bf16* b, float* c, std::int64_t ldc, std::int64_t rows,
                  std::int64_t cols, float alpha, float beta, float* buffer) noexcept {
  const bool direct = rows == kBlock && cols == kBlock && alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
  const std::int64_t c_stride = ldc * static_cast<std::int64_t>(sizeof(float));
  if (direct && beta == 1.0f) {
    _tile_loadd(0, c, c_stride);
    _tile_loadd(1, c + 16, c_stride);
    _tile_loadd(2, c + 16 * ldc, c_stride);
    _tile_loadd(3, c + 16 * ldc + 16, c_stride);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (std::int64_t s = 0; s < steps; ++s, a += 2 * kTileElems, b += 2 * kTileElems) {
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a + kTileElems, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b + kTileElems, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if (direct) {
    _tile_stored(0, c, c_stride);
    _tile_stored(1, c + 16, c_stride);
    _tile_stored(2, c + 16 * ldc, c_stride);
    _tile_stored(3, c + 16 * ldc + 16, c_stride);
    return;
  }
  constexpr std::int64_t kRowBytes = kBlock * sizeof(float);
  _tile_stored(0, buffer, kRowBytes);
  _tile_stored(1, buffer + 16, kRowBytes);
  _tile_stored(2, buffer + 16 * kBlock, kRowBytes);
  _tile_stored(3, buffer + 16 * kBlock + 16, kRowBytes);
  for (std::int64_t i = 0; i < rows; ++i)
    store_scaled_row(c + i * ldc, cols, _mm512_load_ps(buffer + i * kBlock), _mm512_load_ps(buffer + i * kBlock + 16),
                     alpha, beta);
}

}  // namespace

bool amx_bf16_gemm(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const MatrixArg<float>& a,
                   const MatrixArg<float>& b, float beta, float* c, std::int64_t ldc, int threads) noexcept {
  const std::int64_t max_panels = (std::min(m, kRowBlock) + kBlock - 1) / kBlock;
  const std::int64_t max_depth = round_up(std::min(k, kDepth), kStep);
  thread_local PackBuffer<bf16> a_buffer;
  bf16* a_packed = a_buffer.reserve(max_panels * kBlock * max_depth);
  if (a_packed == nullptr) return false;
  std::atomic<bool> ok{true};
  const std::int64_t tasks = (n + kTaskCols - 1) / kTaskCols;
  for (std::int64_t r0 = 0; r0 < m; r0 += kRowBlock) {
    const std::int64_t rows = std::min(kRowBlock, m - r0), panels = (rows + kBlock - 1) / kBlock;
    for (std::int64_t d0 = 0; d0 < k; d0 += kDepth) {
      const std::int64_t depth = std::min(kDepth, k - d0), steps = round_up(depth, kStep) / kStep;
      const std::int64_t panel_elems = kBlock * steps * kStep;
      const float block_beta = d0 == 0 ? beta : 1.0f;  // later super blocks add to c
      std::atomic<std::int64_t> next_task{0};
#pragma omp parallel num_threads(threads) if (threads > 1)
      {
#pragma omp for schedule(static)
        for (std::int64_t q = 0; q < panels; ++q)
          pack_a_panel(a, r0 + q * kBlock, std::min(kBlock, rows - q * kBlock), d0, depth, a_packed + q * panel_elems);
        thread_local PackBuffer<bf16> b_buffer;
        thread_local PackBuffer<float> c_buffer;
        bf16* b_packed = b_buffer.reserve(kTaskCols * steps * kStep);
        float* block = c_buffer.reserve(kBlock * kBlock);
        if (b_packed == nullptr || block == nullptr) ok = false;
        configure_tiles();
        for (std::int64_t task; ok && (task = next_task.fetch_add(1)) < tasks;) {
          const std::int64_t c0 = task * kTaskCols, cols = std::min(kTaskCols, n - c0);
          for (std::int64_t j = 0; j < cols; j += kBlock)
            pack_b_panel(b, d0, depth, c0 + j, std::min(kBlock, cols - j), b_packed + j / kBlock * panel_elems);
          for (std::int64_t q = 0; q < panels; ++q)
            for (std::int64_t j = 0; j < cols; j += kBlock)
              micro_kernel(steps, a_packed + q * panel_elems, b_packed + j / kBlock * panel_elems,
                           c + (r0 + q * kBlock) * ldc + c0 + j, ldc, std::min(kBlock, rows - q * kBlock),
                           std::min(kBlock, cols - j), alpha, block_beta, block);
        }
        _tile_release();
      }
      if (!ok) return false;
    }
  }
  return true;
}

}  // namespace infini::cpu
#endif
