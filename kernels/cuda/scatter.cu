// CUDA kernel of UnsortedSegmentSum (the gradient of GatherV2, so of every embedding lookup), with
// the CPU kernel's semantics and dtypes (kernels/cpu/scatter.cpp: float32, float64, int32, int64;
// int32 or int64 ids) and its very bits, run after run.
//
// The CPU adds the data rows into their segment in increasing row order. Atomic adds would sum in
// an order the GPU picks anew each run, so instead:
//   1. each row's id becomes a sort key (a bad id becomes `num_segments`, which sorts after every
//      segment and so is summed into none, and is recorded: index_check.cuh);
//   2. the (key, row) pairs are sorted by key with CUB's radix sort, which is stable and
//      deterministic: the rows of one segment stay in increasing order;
//   3. each segment finds its run of sorted rows by binary search;
//   4. one thread per (segment, column) adds its run in that order onto a zero, with plain adds
//      (no multiply the compiler could fuse, no atomics), exactly the CPU's sum. A segment with no
//      rows is zero.
// Integer sums take the same path (they wrap, as on the CPU), so there is one mechanism for all.
//
// The price of the CPU's order: a segment's rows are added by one thread, so a few segments of
// very many narrow rows go at the speed of one thread, as they do on one CPU core; the sort costs
// a few passes over 8 bytes per row, small beside the data when rows are wide (an embedding).
//
// Bad ids fail with the CPU's message at the device's next synchronisation, not at once.
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cpu/index_errors.h"
#include "kernels/cuda/copy_launch.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/index_check.cuh"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

// Key k (a segment, or `segments` for a bad id) and row i of each data row, for the sort.
template <class I, class K>
__global__ void segment_keys_kernel(K* __restrict__ keys, K* __restrict__ rows, const I* __restrict__ ids,
                                    int64_t count, int64_t segments, IndexErrorSlot* slot, uint64_t call) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const int64_t v = static_cast<int64_t>(ids[i]);
    const bool ok = id_in_range(v, segments);
    keys[i] = static_cast<K>(ok ? v : segments);
    rows[i] = static_cast<K>(i);
    if (!ok) record_bad_id(slot, call, i, v);
  }
}

// starts[s] = the first sorted position whose key is >= s, for s in [0, segments]: segment s owns
// sorted positions [starts[s], starts[s + 1]).
template <class K>
__global__ void segment_starts_kernel(K* __restrict__ starts, const K* __restrict__ keys, int64_t count,
                                      int64_t segments) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t s = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; s <= segments; s += stride) {
    int64_t lo = 0, hi = count;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<int64_t>(keys[mid]) < s) lo = mid + 1;
      else hi = mid;
    }
    starts[s] = static_cast<K>(lo);
  }
}

// The CPU's `out += in`: round-to-nearest adds the compiler may not fuse with anything, and
// wrapping integer adds.
template <class T>
__device__ __forceinline__ T plain_add(T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    return __fadd_rn(a, b);
  } else if constexpr (std::is_same_v<T, double>) {
    return __dadd_rn(a, b);
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  }
}

// out[s, c] = the sum over segment s's sorted rows r, in increasing r, of data[r, c]. Consecutive
// threads take consecutive columns of one segment, so they read consecutive elements of each row.
template <class T, class K>
__global__ void segment_sum_kernel(T* __restrict__ out, const T* __restrict__ data, const K* __restrict__ rows,
                                   const K* __restrict__ starts, int64_t n, int64_t inner) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t s = i / inner, c = i - s * inner;
    const int64_t end = static_cast<int64_t>(starts[s + 1]);
    T acc{};
    for (int64_t p = static_cast<int64_t>(starts[s]); p < end; ++p)
      acc = plain_add(acc, data[static_cast<int64_t>(rows[p]) * inner + c]);
    out[i] = acc;
  }
}

// Device scratch carved out of one allocation, each piece aligned for any element type.
class Scratch {
 public:
  template <class E>
  size_t add(int64_t count) {
    const size_t at = bytes_;
    bytes_ += (static_cast<size_t>(count) * sizeof(E) + kAlign - 1) / kAlign * kAlign;
    return at;
  }
  size_t add_bytes(size_t n) { return add<unsigned char>(static_cast<int64_t>(n)); }
  void allocate(const KernelContext& ctx) {
    // From the device's stream-ordered allocator: freed when this call returns, yet not reused
    // before the kernels queued here have run.
    block_ = Tensor::empty(uint8, Shape{static_cast<int64_t>(std::max<size_t>(bytes_, 1))}, &ctx.device);
  }
  template <class E>
  E* at(size_t offset) const {
    return reinterpret_cast<E*>(static_cast<unsigned char*>(raw_data(block_)) + offset);
  }

 private:
  static constexpr size_t kAlign = 256;
  size_t bytes_ = 0;
  Tensor block_;
};

void check_cub(cudaError_t err, const KernelContext& ctx) {
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Internal("[" + ctx.op.display + "] CUB radix sort failed: " + cudaGetErrorString(err));
  }
}

// K holds a segment (and the bad-id key `segments`) and a row number.
template <class T, class I, class K>
void sorted_segment_sum(KernelContext& ctx, const I* ids, int64_t count, int64_t segments, int64_t inner) {
  CudaContext& cu = cuda_context(ctx);
  const Tensor& out = ctx.output(0);
  // Only the bits that can be set are sorted: keys go up to `segments`.
  const int end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(segments))));
  const K items = static_cast<K>(count);
  size_t sort_bytes = 0;
  check_cub(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const K*>(nullptr),
                                            static_cast<K*>(nullptr), static_cast<const K*>(nullptr),
                                            static_cast<K*>(nullptr), items, 0, end_bit, cu.stream),
            ctx);
  Scratch scratch;
  const size_t keys_in = scratch.add<K>(count), rows_in = scratch.add<K>(count);
  const size_t keys_out = scratch.add<K>(count), rows_out = scratch.add<K>(count);
  const size_t starts = scratch.add<K>(segments + 1), sort_temp = scratch.add_bytes(sort_bytes);
  scratch.allocate(ctx);

  launch_with_id_check(
      ctx,
      [ids_shape = ctx.input(1).shape(), segments](int64_t j, int64_t value) {
        return cpu::segment_id_message(j, ids_shape, value, segments);
      },
      [&](IndexErrorSlot* slot, uint64_t call) {
        const LaunchGeometry lg = launch_geometry(count);
        segment_keys_kernel<I, K><<<lg.blocks, lg.threads, 0, cu.stream>>>(
            scratch.at<K>(keys_in), scratch.at<K>(rows_in), ids, count, segments, slot, call);
        check_launch(ctx);
      });
  check_cub(cub::DeviceRadixSort::SortPairs(scratch.at<void>(sort_temp), sort_bytes, scratch.at<K>(keys_in),
                                            scratch.at<K>(keys_out), scratch.at<K>(rows_in), scratch.at<K>(rows_out),
                                            items, 0, end_bit, cu.stream),
            ctx);
  const LaunchGeometry sg = launch_geometry(segments + 1);
  segment_starts_kernel<K><<<sg.blocks, sg.threads, 0, cu.stream>>>(scratch.at<K>(starts), scratch.at<K>(keys_out),
                                                                    count, segments);
  check_launch(ctx);
  const int64_t n = out.size();
  const LaunchGeometry lg = launch_geometry(n);
  segment_sum_kernel<T, K><<<lg.blocks, lg.threads, 0, cu.stream>>>(
      out_data<T>(ctx), in_data<T>(ctx, 0), scratch.at<K>(rows_out), scratch.at<K>(starts), n, inner);
  check_launch(ctx);
}

template <class T, class I>
void segment_sum_typed(KernelContext& ctx) {
  const Tensor& ids = ctx.input(1);
  const Tensor& out = ctx.output(0);
  const int64_t segments = ctx.attrs.get<int64_t>("num_segments");
  const int64_t count = ids.size();
  const I* id = count ? static_cast<const I*>(raw_data(ids)) : nullptr;
  if (out.size() == 0) {  // nothing to sum, but bad ids still fail
    check_ids_only(ctx, id, count, segments, [ids_shape = ids.shape(), segments](int64_t j, int64_t value) {
      return cpu::segment_id_message(j, ids_shape, value, segments);
    });
    return;
  }
  if (count == 0) {
    check_cuda(cudaMemsetAsync(raw_data(out), 0, out.nbytes(), cuda_context(ctx).stream),
               "unsorted_segment_sum: zero the output");
    return;
  }
  const int64_t inner = out.size() / segments;
  // 32-bit keys and row numbers halve the sort's traffic; both must also hold the bad-id key.
  constexpr int64_t kMax32 = std::numeric_limits<uint32_t>::max();
  if (count <= kMax32 && segments < kMax32) sorted_segment_sum<T, I, uint32_t>(ctx, id, count, segments, inner);
  else sorted_segment_sum<T, I, uint64_t>(ctx, id, count, segments, inner);
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
