// CUDA kernels of the array ops that copy: ConcatV2, Slice, Split, GatherV2 and OneHot, with the CPU
// kernels' semantics (kernels/cpu/array.cpp). ConcatV2, Slice and GatherV2 move bits only and take
// all nine dtypes; OneHot writes float32 and ignores indices outside [0, depth) as the CPU does.
//
// GatherV2 refuses out-of-range indices with the CPU's message, but not at once: the gather writes
// zeros where a bad index points and records it, and the error is raised at the device's next
// synchronisation (kernels/cuda/index_check.cuh), so a good call never waits for the GPU.
#include <cuda_runtime.h>

#include "kernels/cpu/index_errors.h"
#include "kernels/cuda/copy_launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/index_check.cuh"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

int64_t normalized_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// One input of a concat: `rows` rows of `width` elements, into columns [offset, offset + width)
// of output rows `row` elements long.
template <class W>
__global__ void concat_piece_kernel(W* __restrict__ out, const W* __restrict__ in, int64_t n, int64_t width,
                                    int64_t row, int64_t offset) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / width;
    out[r * row + offset + (i - r * width)] = in[i];
  }
}

void concat_kernel(KernelContext& ctx) {
  const Tensor& out = ctx.output(0);
  if (out.size() == 0) return;
  const int64_t axis = normalized_axis(ctx.attrs.get<int64_t>("axis"), out.rank());
  std::vector<const Shape*> shapes;
  for (const Tensor& t : ctx.inputs) shapes.push_back(&t.shape());
  const ConcatGeometry g = concat_geometry(shapes, axis);
  CudaContext& cu = cuda_context(ctx);
  visit_width(out, [&](auto w) {
    using W = decltype(w);
    for (size_t k = 0; k < shapes.size(); ++k) {
      const int64_t n = g.outer * g.width[k];
      if (n == 0) continue;
      const W* in = in_data<W>(ctx, static_cast<int>(k));
      if (g.outer == 1 || g.width[k] == g.row) {  // one contiguous block of the output
        copy_on_stream(ctx, out_data<W>(ctx) + g.offset[k], in, static_cast<size_t>(n) * sizeof(W));
        continue;
      }
      const LaunchGeometry lg = launch_geometry(n);
      concat_piece_kernel<W><<<lg.blocks, lg.threads, 0, cu.stream>>>(out_data<W>(ctx), in, n, g.width[k], g.row,
                                                                     g.offset[k]);
      check_launch(ctx);
    }
  });
}

// The window of input 0 starting at `begin` with output i's shape, into output i (Slice, and each
// part of Split).
void copy_window(KernelContext& ctx, const std::vector<int64_t>& begin, int i) {
  const Tensor& x = ctx.input(0);
  const Tensor& out = ctx.output(i);
  if (out.size() == 0) return;
  const StridedCopy g = slice_copy(x.shape(), begin, out.shape(), ctx.op.display);
  visit_width(x, [&](auto w) {
    using W = decltype(w);
    if (g.rank == 1 && g.in_strides[0] == 1)  // one contiguous run
      copy_on_stream(ctx, out_data<W>(ctx, i), in_data<W>(ctx, 0) + g.base, static_cast<size_t>(g.n) * sizeof(W));
    else
      launch_strided_copy<W>(ctx, g, out_data<W>(ctx, i), in_data<W>(ctx, 0));
  });
}

void slice_kernel(KernelContext& ctx) { copy_window(ctx, ctx.attrs.get<std::vector<int64_t>>("begin"), 0); }

// Part k is the window that starts k parts along the axis.
void split_kernel(KernelContext& ctx) {
  const int64_t rank = ctx.input(0).shape().rank();
  int64_t axis = ctx.attrs.get<int64_t>("axis");
  if (axis < 0) axis += rank;
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0);
  for (size_t k = 0; k < ctx.outputs.size(); ++k) {
    copy_window(ctx, begin, static_cast<int>(k));
    begin[static_cast<size_t>(axis)] += ctx.outputs[k].shape()[axis];
  }
}

// Output (outer, count, inner) from params (outer, limit, inner). An index outside [0, limit)
// gives zeros and is recorded (by every element that reads it; the slot keeps one).
template <class W, class I>
__global__ void gather_kernel(W* __restrict__ out, const W* __restrict__ params, const I* __restrict__ idx, int64_t n,
                              int64_t count, int64_t inner, int64_t limit, IndexErrorSlot* slot, uint64_t call) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t q = i / inner, e = i - q * inner;
    const int64_t o = q / count, j = q - o * count;
    const int64_t v = static_cast<int64_t>(idx[j]);
    if (id_in_range(v, limit)) {
      out[i] = params[(o * limit + v) * inner + e];
    } else {
      out[i] = W{};
      record_bad_id(slot, call, j, v);
    }
  }
}

template <class I>
void gather_typed(KernelContext& ctx) {
  const Tensor& params = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& out = ctx.output(0);
  const int64_t axis = normalized_axis(ctx.attrs.get_or<int64_t>("axis", 0), params.rank());
  const int64_t limit = params.shape()[axis];
  const int64_t count = indices.size();
  if (count == 0) return;  // the output is empty, and there is nothing to check
  // Copies: the message is made at the next synchronisation, after this call has returned.
  auto message = [indices_shape = indices.shape(), params_shape = params.shape(), axis, limit](int64_t j,
                                                                                              int64_t value) {
    return cpu::gather_index_message(j, indices_shape, value, axis, params_shape, limit);
  };
  const I* idx = static_cast<const I*>(raw_data(indices));
  const int64_t n = out.size();
  if (n == 0) return check_ids_only(ctx, idx, count, limit, std::move(message));  // bad indices still fail
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < params.rank(); ++d) inner *= params.shape()[d];
  CudaContext& cu = cuda_context(ctx);
  const LaunchGeometry lg = launch_geometry(n);
  launch_with_id_check(ctx, std::move(message), [&](IndexErrorSlot* slot, uint64_t call) {
    visit_width(params, [&](auto w) {
      using W = decltype(w);
      gather_kernel<W, I><<<lg.blocks, lg.threads, 0, cu.stream>>>(out_data<W>(ctx), in_data<W>(ctx, 0), idx, n,
                                                                   count, inner, limit, slot, call);
    });
    check_launch(ctx);
  });
}

void gather(KernelContext& ctx) {
  if (ctx.input(1).dtype() == DType::Int64) gather_typed<int64_t>(ctx);
  else gather_typed<int32_t>(ctx);
}

template <class I>
__global__ void one_hot_kernel(float* __restrict__ out, const I* __restrict__ idx, int64_t n, int64_t depth) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t j = i / depth;
    out[i] = static_cast<int64_t>(idx[j]) == i - j * depth ? 1.f : 0.f;
  }
}

template <class I>
void one_hot(KernelContext& ctx) {
  const int64_t n = ctx.output(0).size();
  if (n == 0) return;
  CudaContext& cu = cuda_context(ctx);
  const LaunchGeometry lg = launch_geometry(n);
  one_hot_kernel<I><<<lg.blocks, lg.threads, 0, cu.stream>>>(out_data<float>(ctx), in_data<I>(ctx, 0), n,
                                                             ctx.attrs.get<int64_t>("depth"));
  check_launch(ctx);
}

}  // namespace

void register_array_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dt = static_cast<DType>(d);
    register_kernel("ConcatV2", DeviceType::CUDA, dt, concat_kernel);
    register_kernel("Slice", DeviceType::CUDA, dt, slice_kernel);
    register_kernel("Split", DeviceType::CUDA, dt, split_kernel);
    register_kernel("GatherV2", DeviceType::CUDA, dt, gather);
  }
  register_kernel("OneHot", DeviceType::CUDA, int8, one_hot<int8_t>);
  register_kernel("OneHot", DeviceType::CUDA, uint8, one_hot<uint8_t>);
  register_kernel("OneHot", DeviceType::CUDA, int32, one_hot<int32_t>);
  register_kernel("OneHot", DeviceType::CUDA, int64, one_hot<int64_t>);
}

}  // namespace weft::cuda
