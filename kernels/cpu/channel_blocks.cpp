#include "kernels/cpu/channel_blocks.h"

#include <immintrin.h>

#include <algorithm>

namespace weft::cpu {

namespace {

// Calls copy(pixels, offset in NHWC, offset in the blocked image, lanes) for each run of pixels
// of one block of one image.
template <class Copy>
void for_each_block(int64_t n, int64_t hw, int64_t c, int block, Copy copy) {
  const int64_t blocks = (c + block - 1) / block;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t b = 0; b < blocks; ++b)
      copy(hw, i * hw * c + b * block, (i * blocks + b) * hw * block, static_cast<int>(std::min<int64_t>(block, c - b * block)));
}

bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  return yes;
}

// (A lambda does not take its caller's target, so these spell their loops out.)
__attribute__((target("avx512f,avx512vl"))) void to_blocks_avx512(const float* src, float* dst, int64_t n,
                                                                   int64_t hw, int64_t c, int block) {
  const int64_t blocks = (c + block - 1) / block;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* s = src + i * hw * c + b * block;
      float* d = dst + (i * blocks + b) * hw * block;
      const auto mask = static_cast<__mmask16>((1u << std::min<int64_t>(block, c - b * block)) - 1u);
      if (block == 16)
        for (int64_t px = 0; px < hw; ++px, s += c, d += 16) _mm512_storeu_ps(d, _mm512_maskz_loadu_ps(mask, s));
      else
        for (int64_t px = 0; px < hw; ++px, s += c, d += 8)
          _mm256_storeu_ps(d, _mm256_maskz_loadu_ps(static_cast<__mmask8>(mask), s));
    }
}

__attribute__((target("avx512f,avx512vl"))) void from_blocks_avx512(const float* src, float* dst, int64_t n,
                                                                     int64_t hw, int64_t c, int block) {
  const int64_t blocks = (c + block - 1) / block;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* s = src + (i * blocks + b) * hw * block;
      float* d = dst + i * hw * c + b * block;
      const auto mask = static_cast<__mmask16>((1u << std::min<int64_t>(block, c - b * block)) - 1u);
      if (block == 16)
        for (int64_t px = 0; px < hw; ++px, s += 16, d += c) _mm512_mask_storeu_ps(d, mask, _mm512_loadu_ps(s));
      else
        for (int64_t px = 0; px < hw; ++px, s += 8, d += c)
          _mm256_mask_storeu_ps(d, static_cast<__mmask8>(mask), _mm256_loadu_ps(s));
    }
}

}  // namespace

void nhwc_to_channel_blocks(const float* src, float* dst, int64_t n, int64_t hw, int64_t c, int block) {
  if (has_avx512()) return to_blocks_avx512(src, dst, n, hw, c, block);
  for_each_block(n, hw, c, block, [&](int64_t pixels, int64_t from, int64_t to, int lanes) {
    for (int64_t px = 0; px < pixels; ++px)
      for (int k = 0; k < block; ++k) dst[to + px * block + k] = k < lanes ? src[from + px * c + k] : 0.f;
  });
}

void channel_blocks_to_nhwc(const float* src, float* dst, int64_t n, int64_t hw, int64_t c, int block) {
  if (has_avx512()) return from_blocks_avx512(src, dst, n, hw, c, block);
  for_each_block(n, hw, c, block, [&](int64_t pixels, int64_t to, int64_t from, int lanes) {
    for (int64_t px = 0; px < pixels; ++px)
      for (int k = 0; k < lanes; ++k) dst[to + px * c + k] = src[from + px * block + k];
  });
}

}  // namespace weft::cpu
