// CUDA kernel of Transpose, with the CPU kernel's semantics (kernels/cpu/transpose.cpp) for all
// nine dtypes: pure data movement, bit for bit.
//
// The permutation is merged on the host exactly as on the CPU (copy_geometry.h). What remains is
//   - at most one dim: a device-to-device copy;
//   - the last two merged dims swapped, the others in place (NCHW <-> NHWC, a matrix transpose):
//     32x32 tiles staged through shared memory, so that both the reads and the writes of a warp
//     touch consecutive addresses;
//   - anything else: one thread per output element, reading through the merged strides.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/copy_launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

constexpr int kTile = 32;
constexpr int kTileRowsPerPass = 8;  // a block is 32 x 8 threads; each moves 4 elements of a tile
// Tiles are handed out by a grid-stride loop; more blocks than this only add scheduling work.
constexpr int64_t kMaxTileBlocks = int64_t{1} << 16;

// Input (batch, rows, cols) -> output (batch, cols, rows), one 32x32 tile per loop iteration.
// Every thread of the block runs the same number of iterations, so the barriers are uniform.
template <class W>
__global__ void batched_transpose_kernel(W* __restrict__ out, const W* __restrict__ in, int64_t rows, int64_t cols,
                                         int64_t tiles_r, int64_t tiles_c, int64_t total_tiles) {
  // One padding column: a warp reading a tile column then hits 32 different banks.
  __shared__ W tile[kTile][kTile + 1];
  const int64_t per_batch = tiles_r * tiles_c;
  const int64_t matrix = rows * cols;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t t = blockIdx.x; t < total_tiles; t += gridDim.x) {
    const int64_t b = t / per_batch;
    const int64_t in_batch = t - b * per_batch;
    const int64_t tr = in_batch / tiles_c;
    const int64_t r0 = tr * kTile, c0 = (in_batch - tr * tiles_c) * kTile;
    const W* src = in + b * matrix;
    W* dst = out + b * matrix;
    // Read rows r0 + k of the tile, columns c0 + tx: consecutive threads, consecutive columns.
    for (int k = ty; k < kTile; k += kTileRowsPerPass) {
      const int64_t r = r0 + k, c = c0 + tx;
      if (r < rows && c < cols) tile[k][tx] = src[r * cols + c];
    }
    __syncthreads();
    // Write output row c0 + k (an input column), output columns r0 + tx (input rows).
    for (int k = ty; k < kTile; k += kTileRowsPerPass) {
      const int64_t c = c0 + k, r = r0 + tx;
      if (c < cols && r < rows) dst[c * rows + r] = tile[tx][k];
    }
    __syncthreads();  // the tile is reused by the next iteration
  }
}

template <class W>
void launch_batched_transpose(const KernelContext& ctx, const BatchedTranspose& bt, W* out, const W* in) {
  CudaContext& cu = cuda_context(ctx);
  const int64_t tiles_r = (bt.rows + kTile - 1) / kTile;
  const int64_t tiles_c = (bt.cols + kTile - 1) / kTile;
  const int64_t total = bt.batch * tiles_r * tiles_c;
  const unsigned blocks = static_cast<unsigned>(std::min(total, kMaxTileBlocks));
  batched_transpose_kernel<W><<<blocks, dim3(kTile, kTileRowsPerPass), 0, cu.stream>>>(out, in, bt.rows, bt.cols,
                                                                                       tiles_r, tiles_c, total);
  check_launch(ctx);
}

void transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.size() == 0) return;
  const TransposePlan plan = simplify_transpose(x.shape(), ctx.attrs.get_or<std::vector<int64_t>>("perm", {}));
  if (plan.dims.size() <= 1) {
    copy_on_stream(ctx, raw_data(ctx.output(0)), raw_data(x), x.nbytes());
    return;
  }
  visit_width(x, [&](auto w) {
    using W = decltype(w);
    if (const std::optional<BatchedTranspose> bt = as_batched_transpose(plan))
      launch_batched_transpose<W>(ctx, *bt, out_data<W>(ctx), in_data<W>(ctx, 0));
    else
      launch_strided_copy<W>(ctx, transpose_copy(plan, ctx.op.display), out_data<W>(ctx), in_data<W>(ctx, 0));
  });
}

}  // namespace

void register_transpose_kernels() {
  for (int d = 0; d < kNumDTypes; ++d)
    register_kernel("Transpose", DeviceType::CUDA, static_cast<DType>(d), transpose_kernel);
}

}  // namespace weft::cuda
