// The panel formats of the packed SGEMM (sgemm_packed.cpp): how a and b are packed for
// its micro-kernel, and the one multiply-add step the micro-kernel makes per panel word.
//   a: row panels of kMR rows, word (step t, row i) at t * kMR + i;
//   b: column panels of kNR columns, word (step t, column j) at t * kNR + j.
// Float32Panels: a word is a float, a step is one FMA deep.
// Bf16PairPanels (AVX512-BF16): a word is two bfloat16 of the depths 2t (low half) and
// 2t + 1, rounded to nearest (ties to even); a step is one VDPBF16PS, which sums both
// products into a float32 lane, so a step goes twice as deep. An odd depth ends with a
// zero in the high half.
// Rows, columns and depths past the ends of a panel are zero. A plain C++ header for the
// unit built with -march=native; it holds nothing without AVX-512.
#pragma once

#include "gemm_eigen.h"
#include "gemm_simd.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace infini::cpu::panels {

inline constexpr std::int64_t kMR = 12;  // rows of the register tile (a multiple of 4, see sweep)
inline constexpr std::int64_t kNR = 32;  // columns: two zmm vectors of float32 lanes
inline constexpr __mmask16 kPanelRow = (1u << kMR) - 1;  // kMR words of a 16-lane store

// The micro-kernel reads a last panel whole: zero its half past `cols` (if any), `steps`
// words deep. Words are 4 bytes in both formats.
template <class Word>
void zero_last_half(std::int64_t steps, std::int64_t cols, Word* dst) noexcept {
  static_assert(sizeof(Word) == 4);
  if (const std::int64_t half = (cols + 15) / 16 * 16; half % kNR != 0)
    for (std::int64_t t = 0; t < steps; ++t)
      _mm512_store_si512(dst + half / kNR * kNR * steps + t * kNR + 16, _mm512_setzero_si512());
}

struct Float32Panels {
  using Word = float;
  static constexpr std::int64_t kDepthPerWord = 1;
  static constexpr std::int64_t kDepth = 384;  // depth of one micro-kernel call

  static __m512 load(const Word* p) noexcept { return _mm512_load_ps(p); }
  static __m512 broadcast(const Word* p) noexcept { return _mm512_set1_ps(*p); }
  static __m512 madd(__m512 acc, __m512 a, __m512 b) noexcept { return _mm512_fmadd_ps(a, b, acc); }

  // Packs rows [r0, r0 + rows) (rows <= kMR) of a row-major a, depth [p0, p0 + depth), into
  // one row panel. Transposes 16 deep at a time.
  static void pack_a_panel(const MatrixArg<float>& a, std::int64_t r0, std::int64_t rows, std::int64_t p0,
                           std::int64_t depth, float* panel) noexcept {
    __m512 column[16];
    for (std::int64_t p = 0; p < depth; p += 16) {
      const std::int64_t strip = std::min<std::int64_t>(16, depth - p);
      load_transposed(a.data + r0 * a.ld + p0 + p, a.ld, rows, strip, column);
      for (std::int64_t t = 0; t < strip; ++t) _mm512_mask_storeu_ps(panel + (p + t) * kMR, kPanelRow, column[t]);
    }
  }

  // Column-major a: depth p of a slice `depth` deep into every panel of the slice; src is
  // that column of a, its rows [r0, r0 + rows) contiguous, so the reads stream.
  static void pack_a_column(const float* src, [[maybe_unused]] std::int64_t ld, std::int64_t rows, std::int64_t p,
                            std::int64_t depth, std::int64_t panels, float* slice) noexcept {
    for (std::int64_t q = 0; q < panels; ++q) {
      const __m512 column = _mm512_maskz_loadu_ps(first_lanes(rows - q * kMR), src + q * kMR);
      _mm512_mask_storeu_ps(slice + q * kMR * depth + p * kMR, kPanelRow, column);
    }
  }

  // Packs depth [p0, p0 + depth) of columns [c0, c0 + cols) of b into column panels of kNR
  // (the last one zero-padded), panel after panel.
  static void pack_b(const MatrixArg<float>& b, std::int64_t p0, std::int64_t depth, std::int64_t c0,
                     std::int64_t cols, float* dst) noexcept {
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
    zero_last_half(depth, cols, dst);
  }
};

#if defined(__AVX512BF16__)
struct Bf16PairPanels {
  using Word = std::uint32_t;
  static constexpr std::int64_t kDepthPerWord = 2;
  static constexpr std::int64_t kDepth = 768;  // 384 steps, as Float32Panels

  static __m512 load(const Word* p) noexcept { return _mm512_castsi512_ps(_mm512_load_si512(p)); }
  static __m512 broadcast(const Word* p) noexcept { return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(*p))); }
  static __m512 madd(__m512 acc, __m512 a, __m512 b) noexcept {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(a), reinterpret_cast<__m512bh&>(b));
  }

  // 32 floats (lo, hi) as 16 words: word t pairs elements 2t and 2t + 1.
  static __m512 pairs_along(__m512 lo, __m512 hi) noexcept {
    const __m512bh packed = _mm512_cvtne2ps_pbh(hi, lo);  // elements 0-15 from lo, 16-31 from hi
    return reinterpret_cast<const __m512&>(packed);
  }
  // Two rows of 16 floats as 16 words: word j pairs even[j] (low half) and odd[j].
  static __m512i pairs_across(__m512 even, __m512 odd) noexcept {
    const __m256bh e = _mm512_cvtneps_pbh(even), o = _mm512_cvtneps_pbh(odd);
    const __m512i lo = _mm512_cvtepu16_epi32(reinterpret_cast<const __m256i&>(e));
    const __m512i hi = _mm512_cvtepu16_epi32(reinterpret_cast<const __m256i&>(o));
    return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
  }

  // Loads 16 lines of up to 32 floats along the depth (line r at src + r * ld, `lines` of
  // them, `count` floats each, the rest zero) as words, transposed: out[t] holds word t of
  // every line (lane r = line r).
  static void load_pairs_transposed(const float* src, std::int64_t ld, std::int64_t lines, std::int64_t count,
                                    __m512 out[16]) noexcept {
    const __mmask16 lo = first_lanes(count), hi = first_lanes(count - 16);
    for (int r = 0; r < 16; ++r)
      out[r] = r < lines ? pairs_along(_mm512_maskz_loadu_ps(lo, src + r * ld), _mm512_maskz_loadu_ps(hi, src + r * ld + 16))
                         : _mm512_setzero_ps();
    transpose16x16(out);
  }

  // Row-major a: rows [r0, r0 + rows) (rows <= kMR), depth [p0, p0 + depth), into one row
  // panel of (depth + 1) / 2 steps, 32 deep (16 steps) at a time.
  static void pack_a_panel(const MatrixArg<float>& a, std::int64_t r0, std::int64_t rows, std::int64_t p0,
                           std::int64_t depth, Word* panel) noexcept {
    __m512 column[16];
    for (std::int64_t p = 0; p < depth; p += 32) {
      load_pairs_transposed(a.data + r0 * a.ld + p0 + p, a.ld, rows, depth - p, column);
      const std::int64_t steps = std::min<std::int64_t>(16, (depth - p + 1) / 2);
      for (std::int64_t t = 0; t < steps; ++t)
        _mm512_mask_storeu_ps(reinterpret_cast<float*>(panel + (p / 2 + t) * kMR), kPanelRow, column[t]);
    }
  }

  // Column-major a: depths p and p + 1 (p even) of a slice `depth` deep into step p / 2 of
  // every panel of the slice; src is column p of a (rows contiguous), src + ld column p + 1.
  static void pack_a_column(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t p, std::int64_t depth,
                            std::int64_t panels, Word* slice) noexcept {
    if (p % 2 != 0) return;  // packed with p - 1
    const std::int64_t steps = (depth + 1) / 2;
    const float* odd = p + 1 < depth ? src + ld : nullptr;
    for (std::int64_t q = 0; q < panels; ++q) {
      const __mmask16 valid = first_lanes(rows - q * kMR);
      const __m512 e = _mm512_maskz_loadu_ps(valid, src + q * kMR);
      const __m512 o = odd ? _mm512_maskz_loadu_ps(valid, odd + q * kMR) : _mm512_setzero_ps();
      _mm512_mask_storeu_epi32(slice + q * kMR * steps + p / 2 * kMR, kPanelRow, pairs_across(e, o));
    }
  }

  // Depth [p0, p0 + depth) of columns [c0, c0 + cols) of b into column panels of kNR,
  // (depth + 1) / 2 steps each.
  static void pack_b(const MatrixArg<float>& b, std::int64_t p0, std::int64_t depth, std::int64_t c0,
                     std::int64_t cols, Word* dst) noexcept {
    const std::int64_t steps = (depth + 1) / 2;
    if (!b.col_major) {  // rows p, p + 1 of the block are contiguous in b: pair them lane by lane
      for (std::int64_t t = 0; t < steps; ++t) {
        const float* even = b.data + (p0 + 2 * t) * b.ld + c0;
        const float* odd = 2 * t + 1 < depth ? even + b.ld : nullptr;
        for (std::int64_t j0 = 0; j0 < (cols + kNR - 1) / kNR * kNR; j0 += 16) {
          const __mmask16 valid = first_lanes(cols - j0);
          const __m512 e = _mm512_maskz_loadu_ps(valid, even + j0);
          const __m512 o = odd ? _mm512_maskz_loadu_ps(valid, odd + j0) : _mm512_setzero_ps();
          _mm512_store_si512(dst + j0 / kNR * kNR * steps + t * kNR + j0 % kNR, pairs_across(e, o));
        }
      }
      return;
    }
    // b transposed: column j of the block is row c0 + j of b's storage, contiguous along the
    // depth; pair 32 deep and transpose 16 x 16 words into the panels.
    __m512 row[16];
    for (std::int64_t j0 = 0; j0 < cols; j0 += 16) {
      Word* panel = dst + j0 / kNR * kNR * steps + j0 % kNR;
      for (std::int64_t p = 0; p < depth; p += 32) {
        load_pairs_transposed(b.data + (c0 + j0) * b.ld + p0 + p, b.ld, std::min<std::int64_t>(16, cols - j0),
                              depth - p, row);
        const std::int64_t strip = std::min<std::int64_t>(16, (depth - p + 1) / 2);
        for (std::int64_t t = 0; t < strip; ++t) _mm512_store_ps(reinterpret_cast<float*>(panel + (p / 2 + t) * kNR), row[t]);
      }
    }
    zero_last_half(steps, cols, dst);
  }
};
#endif

}  // namespace infini::cpu::panels
#endif
