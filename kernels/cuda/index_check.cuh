// How the CUDA kernels that read ids (GatherV2 in array.cu, UnsortedSegmentSum in scatter.cu)
// refuse a bad one without synchronising: the kernel that reads the ids tests each against its
// bound, never dereferences one outside it, and records it with record_bad_id in the device's
// IndexErrorSlot; the host raises it, with the CPU kernel's message, at the device's next
// synchronisation (runtime/cuda/index_error_record.h says where and how).
//
//   launch_with_id_check(ctx, [=](int64_t j, int64_t v) { return cpu::segment_id_message(j, shape, v, limit); },
//                        [&](IndexErrorSlot* slot, uint64_t call) { kernel<<<...>>>(..., slot, call); });
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "kernels/cuda/elementwise_geometry.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/index_error_record.h"
#include "runtime/kernel_registry.h"

namespace weft::cuda {

// Whether id v lies in [0, limit): one unsigned compare (a negative id wraps past any limit).
__device__ __forceinline__ bool id_in_range(int64_t v, int64_t limit) {
  return static_cast<uint64_t>(v) < static_cast<uint64_t>(limit);
}

// Records that the id at flat `position` of call `call` is `value`, outside its bound. The first
// call to record owns the slot (kernels on one stream run in order, so that is the first bad call
// queued); within it the lowest position wins, the one the CPU kernel names. Bad ids are rare, so
// their cost does not matter; good ids never reach here.
__device__ inline void record_bad_id(IndexErrorSlot* slot, uint64_t call, int64_t position, int64_t value) {
  const auto ticket = static_cast<unsigned long long>(call);
  const unsigned long long owner = atomicCAS(&slot->call, 0ull, ticket);
  if (owner != 0ull && owner != ticket) return;  // an earlier call's error is the one reported
  const auto p = static_cast<unsigned long long>(position);
  if (atomicMin(&slot->position, p) <= p) return;  // this position or a lower one is in already
  // The value must be the one at the lowest position, and two threads that each lowered it may
  // write in either order: compare and write under a lock, so the last writer is the lowest. The
  // lock spins only between threads that lowered the minimum, a handful; on sm_70 and later the
  // threads of a warp make progress independently, so a warp cannot spin on its own lane's lock.
  while (atomicCAS(&slot->lock, 0, 1) != 0) {
  }
  __threadfence();
  if (atomicOr(&slot->position, 0ull) == p)
    atomicExch(reinterpret_cast<unsigned long long*>(&slot->value), static_cast<unsigned long long>(value));
  __threadfence();
  atomicExch(&slot->lock, 0);
}

// For a call whose main kernel reads no id (an empty output): only the check.
template <class I>
__global__ void check_ids_kernel(const I* __restrict__ ids, int64_t count, int64_t limit, IndexErrorSlot* slot,
                                 uint64_t call) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < count; j += stride) {
    const int64_t v = static_cast<int64_t>(ids[j]);
    if (!id_in_range(v, limit)) record_bad_id(slot, call, j, v);
  }
}

// Runs queue(slot, call) (which queues the kernels that read the ids on ctx's stream) as one call
// of ctx's op: message(position, value) words a bad id as the CPU kernel does, and the error is
// raised as ctx.fail would, "[op] message", at the next synchronisation. `message` is called
// later, on any thread: it must hold copies of what it reads (shapes, limits), never references.
template <class Message, class Queue>
void launch_with_id_check(const KernelContext& ctx, Message message, Queue&& queue) {
  CudaContext& cu = cuda_context(ctx);
  cu.index_errors->launch(
      [display = ctx.op.display, message = std::move(message)](int64_t position, int64_t value) {
        return "[" + display + "] " + message(position, value);
      },
      std::forward<Queue>(queue));
}

// Queues check_ids_kernel over `ids` (int32 or int64 on ctx's GPU) as one call of ctx's op.
template <class I, class Message>
void check_ids_only(const KernelContext& ctx, const I* ids, int64_t count, int64_t limit, Message message) {
  if (count == 0) return;
  launch_with_id_check(ctx, std::move(message), [&](IndexErrorSlot* slot, uint64_t call) {
    const LaunchGeometry lg = launch_geometry(count);
    check_ids_kernel<I><<<lg.blocks, lg.threads, 0, cuda_context(ctx).stream>>>(ids, count, limit, slot, call);
    check_launch(ctx);
  });
}

}  // namespace weft::cuda
