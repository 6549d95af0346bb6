// AVX-512 helpers the GEMMs share (sgemm_packed.cpp, sgemm_amx.cpp): 16 x 16 transposes of
// 32-bit lanes for packing, lane masks, and the scaled store of a row of c. A plain C++
// header for the units built with -march=native; it holds nothing without AVX-512.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

#include <cstdint>

namespace infini::cpu {

// r[i] (16 lanes each) becomes column i of the 16 x 16 block whose rows were r[0..15].
inline void transpose16x16(__m512 r[16]) noexcept {
  __m512 t[16];
  // Interleave pairs of rows, then pairs of pairs (within 128-bit lanes), then lanes.
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}

// Mask of the first `count` of 16 lanes (count may be out of [0, 16]).
inline __mmask16 first_lanes(std::int64_t count) noexcept {
  return static_cast<__mmask16>(count >= 16 ? 0xffff : count <= 0 ? 0 : (1u << count) - 1);
}

// Loads a 16 x 16 block: row r (r < rows) is `cols` floats at src + r * ld, the rest of
// the block zero. Returns it transposed: out[t] holds column t (lane r = row r).
inline void load_transposed(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                            __m512 out[16]) noexcept {
  const __mmask16 mask = first_lanes(cols);
  for (int i = 0; i < 16; ++i) out[i] = i < rows ? _mm512_maskz_loadu_ps(mask, src + i * ld) : _mm512_setzero_ps();
  transpose16x16(out);
}

// c[0, cols) (cols <= 32) = alpha * (lo, hi) + beta * c[0, cols); beta == 0 ignores c's old
// values (NaN included).
inline void store_scaled_row(float* c, std::int64_t cols, __m512 lo, __m512 hi, float alpha, float beta) noexcept {
  const __mmask16 m0 = first_lanes(cols), m1 = first_lanes(cols - 16);
  const __m512 va = _mm512_set1_ps(alpha);
  lo = _mm512_mul_ps(va, lo);
  hi = _mm512_mul_ps(va, hi);
  if (beta != 0.0f) {
    const __m512 vb = _mm512_set1_ps(beta);
    lo = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, c), lo);
    hi = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, c + 16), hi);
  }
  _mm512_mask_storeu_ps(c, m0, lo);
  _mm512_mask_storeu_ps(c + 16, m1, hi);
}

}  // namespace infini::cpu
#endif
