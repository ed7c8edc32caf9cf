// CUDA kernel of Pad, with the CPU kernel's semantics (kernels/cpu/pad.cpp): zero padding, the
// op's only mode, for all nine dtypes. Zero is all-zero bits in every dtype, so the kernel moves
// bits only, typed by element width. Dims are merged on the host as on the CPU (copy_geometry.h);
// each output element is written once, from the input or as zero.
#include <cuda_runtime.h>

#include "kernels/cuda/copy_launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

// Index is int32_t when g.index32 (with headroom for the loop, see launch_strided_copy), else
// int64_t; signed, because an index minus its padding goes below zero.
template <class W, class Index>
__global__ void pad_kernel(W* __restrict__ out, const W* __restrict__ in, PadGeometry g) {
  const Index n = static_cast<Index>(g.n);
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    Index rem = i, off = 0;
    bool inside = true;
    for (int d = g.rank - 1; d >= 0; --d) {
      const Index dim = static_cast<Index>(g.out_dims[d]);
      const Index q = rem / dim;
      const Index j = rem - q * dim - static_cast<Index>(g.before[d]);
      rem = q;
      if (j < 0 || j >= static_cast<Index>(g.in_dims[d])) {
        inside = false;
        break;
      }
      off += j * static_cast<Index>(g.in_strides[d]);
    }
    out[i] = inside ? in[off] : W(0);
  }
}

void pad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& out = ctx.output(0);
  if (out.size() == 0) return;
  CudaContext& cu = cuda_context(ctx);
  if (x.size() == 0) {  // all padding
    check_cuda(cudaMemsetAsync(raw_data(out), 0, out.nbytes(), cu.stream), "pad: zero the output");
    return;
  }
  const PadGeometry g = pad_geometry(x.shape(), ctx.attrs.get<std::vector<int64_t>>("paddings"), ctx.op.display);
  const LaunchGeometry lg = launch_geometry(g.n);
  visit_width(x, [&](auto w) {
    using W = decltype(w);
    if (g.index32 && g.n < (int64_t{1} << 31) - (int64_t{1} << 25))
      pad_kernel<W, int32_t><<<lg.blocks, lg.threads, 0, cu.stream>>>(out_data<W>(ctx), in_data<W>(ctx, 0), g);
    else
      pad_kernel<W, int64_t><<<lg.blocks, lg.threads, 0, cu.stream>>>(out_data<W>(ctx), in_data<W>(ctx, 0), g);
  });
  check_launch(ctx);
}

}  // namespace

void register_pad_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) register_kernel("Pad", DeviceType::CUDA, static_cast<DType>(d), pad);
}

}  // namespace weft::cuda
