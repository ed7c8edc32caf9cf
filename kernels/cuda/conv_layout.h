// Moving convolution operands between weft's layouts and cuDNN's, on the GPU: weft's filters are
// [kh, kw, in, out] (TensorFlow's HWIO), which cuDNN has no descriptor for (its NHWC filters are
// [out, kh, kw, in]); and cuDNN pads symmetrically, so an odd SAME padding (the extra row at the
// bottom, TensorFlow's rule) or an uneven EXPLICIT one is given by copying the image into a larger
// zeroed one. Plain C++ header, implemented in conv_layout.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace weft::cuda {

// out[i0, i1, i2, i3] (contiguous, dims out_dims) = in[sum_d (i_d - before_d) * in_strides_d]
// where every i_d - before_d lies in [0, in_dims_d), else zero. Elements are `elem` bytes (2, 4
// or 8): the copy moves bits, so one kernel serves every dtype.
struct Copy4d {
  int64_t out_dims[4] = {1, 1, 1, 1};
  int64_t in_dims[4] = {1, 1, 1, 1};
  int64_t in_strides[4] = {0, 0, 0, 0};
  int64_t before[4] = {0, 0, 0, 0};
};

// Queues the copy on `stream`; the launch's error (cudaErrorInvalidValue for another `elem`).
cudaError_t copy4d(const Copy4d& g, const void* in, void* out, size_t elem, cudaStream_t stream);

}  // namespace weft::cuda
