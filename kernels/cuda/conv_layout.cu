#include "kernels/cuda/conv_layout.h"

namespace weft::cuda {

namespace {

template <class W>
__global__ void copy4d_kernel(Copy4d g, const W* __restrict__ in, W* __restrict__ out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t rem = i, off = 0;
    bool inside = true;
    for (int d = 3; d >= 0; --d) {
      const int64_t q = rem / g.out_dims[d];
      const int64_t j = rem - q * g.out_dims[d] - g.before[d];
      rem = q;
      if (j < 0 || j >= g.in_dims[d]) {
        inside = false;
        break;
      }
      off += j * g.in_strides[d];
    }
    out[i] = inside ? in[off] : W(0);
  }
}

template <class W>
void launch(const Copy4d& g, const void* in, void* out, int64_t n, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
  copy4d_kernel<W><<<grid, kThreads, 0, stream>>>(g, static_cast<const W*>(in), static_cast<W*>(out), n);
}

}  // namespace

cudaError_t copy4d(const Copy4d& g, const void* in, void* out, size_t elem, cudaStream_t stream) {
  const int64_t n = g.out_dims[0] * g.out_dims[1] * g.out_dims[2] * g.out_dims[3];
  if (n == 0) return cudaSuccess;
  switch (elem) {
    case 2: launch<uint16_t>(g, in, out, n, stream); break;
    case 4: launch<uint32_t>(g, in, out, n, stream); break;
    case 8: launch<uint64_t>(g, in, out, n, stream); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace weft::cuda
