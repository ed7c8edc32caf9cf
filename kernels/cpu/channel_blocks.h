// oneDNN's channel-blocked images (aBcd8b, aBcd16b: [n][ceil(c / B)][h * w][B], the lanes of the
// last block past c zero) from and to weft's NHWC images ([n][h * w][c]).
//
// conv_onednn.cpp converts with these instead of oneDNN's reorders where c is not a multiple of
// the block: there oneDNN's reorder is its generic one ("jit:uni"), which took 58-78 us for each
// 32-image chunk of LeNet's 28 x 28 x 6 layer here, a third of the convolution's own time. These
// copy a pixel's c values with one masked load and one store on AVX-512; elsewhere a plain loop.
#pragma once

#include <cstdint>

namespace weft::cpu {

// block is 8 or 16.
void nhwc_to_channel_blocks(const float* src, float* dst, int64_t n, int64_t hw, int64_t c, int block);
void channel_blocks_to_nhwc(const float* src, float* dst, int64_t n, int64_t hw, int64_t c, int block);

}  // namespace weft::cpu
