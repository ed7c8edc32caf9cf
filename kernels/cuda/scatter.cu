// CUDA kernel of UnsortedSegmentSum, with the CPU kernel's semantics (kernels/cpu/scatter.cpp) and
// dtypes (float32, float64, int32, int64; int32 or int64 ids): the output is zeroed and every data
// element is added into its segment's row with an atomic add. A row with a bad id is added
// nowhere, and the id fails with the CPU's message at the device's next synchronisation
// (index_check.cuh).
//
// Integer sums wrap and are exact, whatever the order. Float sums are added in an order the GPU
// chooses (not deterministic from run to run), so they differ from the CPU's (which adds rows in
// increasing order) by rounding only: for an output element summing n rows, by at most
// n * 2^-23 * sum |x| in float32 (n * 2^-52 * sum |x| in float64), as tests/gpu/index_ops_test.cpp
// checks.
#include <cuda_runtime.h>

#include "kernels/cpu/index_errors.h"
#include "kernels/cuda/copy_launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/index_check.cuh"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

template <class T>
__device__ __forceinline__ void atomic_accumulate(T* where, T v) {
  if constexpr (std::is_same_v<T, int64_t>)  // two's complement: the unsigned add wraps the same way
    atomicAdd(reinterpret_cast<unsigned long long*>(where), static_cast<unsigned long long>(v));
  else
    atomicAdd(where, v);
}

// Row i of data (`inner` elements) is added into output row ids[i].
template <class T, class I>
__global__ void segment_sum_kernel(T* __restrict__ out, const T* __restrict__ data, const I* __restrict__ ids,
                                   int64_t n, int64_t inner, int64_t segments, IndexErrorSlot* slot, uint64_t call) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t row = i / inner;
    const int64_t v = static_cast<int64_t>(ids[row]);
    if (id_in_range(v, segments)) atomic_accumulate(out + v * inner + (i - row * inner), data[i]);
    else record_bad_id(slot, call, row, v);
  }
}

template <class T, class I>
void segment_sum_typed(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ids = ctx.input(1);
  const Tensor& out = ctx.output(0);
  const int64_t segments = ctx.attrs.get<int64_t>("num_segments");
  const int64_t count = ids.size();
  const I* id = count ? static_cast<const I*>(raw_data(ids)) : nullptr;
  auto message = [ids_shape = ids.shape(), segments](int64_t j, int64_t value) {
    return cpu::segment_id_message(j, ids_shape, value, segments);
  };
  if (out.size() == 0) return check_ids_only(ctx, id, count, segments, std::move(message));  // bad ids still fail
  CudaContext& cu = cuda_context(ctx);
  check_cuda(cudaMemsetAsync(raw_data(out), 0, out.nbytes(), cu.stream), "unsorted_segment_sum: zero the output");
  const int64_t n = data.size();
  if (n == 0) return;
  const int64_t inner = out.size() / segments;
  const LaunchGeometry lg = launch_geometry(n);
  launch_with_id_check(ctx, std::move(message), [&](IndexErrorSlot* slot, uint64_t call) {
    segment_sum_kernel<T, I><<<lg.blocks, lg.threads, 0, cu.stream>>>(out_data<T>(ctx), in_data<T>(ctx, 0), id, n,
                                                                     inner, segments, slot, call);
    check_launch(ctx);
  });
}

template <class T>
void segment_sum(KernelContext& ctx) {
  if (ctx.input(1).dtype() == DType::Int64) segment_sum_typed<T, int64_t>(ctx);
  else segment_sum_typed<T, int32_t>(ctx);
}

}  // namespace

void register_scatter_kernels() {
  register_kernel("UnsortedSegmentSum", DeviceType::CUDA, float32, segment_sum<float>);
  register_kernel("UnsortedSegmentSum", DeviceType::CUDA, float64, segment_sum<double>);
  register_kernel("UnsortedSegmentSum", DeviceType::CUDA, int32, segment_sum<int32_t>);
  register_kernel("UnsortedSegmentSum", DeviceType::CUDA, int64, segment_sum<int64_t>);
}

}  // namespace weft::cuda
