#include "kernels/cuda/elementwise_geometry.h"

#include <limits>
#include <string>
#include <vector>

#include "kernels/broadcast_dims.h"

#include "runtime/error.h"

namespace weft::cuda {

BroadcastStrides broadcast_strides(const Shape& out, std::initializer_list<const Shape*> inputs, std::string_view op) {
  const int k_count = static_cast<int>(inputs.size());
  if (k_count < 1 || k_count > kMaxElementwiseInputs)
    throw InvalidArgument("[" + std::string(op) + "] a CUDA elementwise kernel takes 1 to " +
                          std::to_string(kMaxElementwiseInputs) + " inputs, got " + std::to_string(k_count));
  const MergedBroadcast m = merge_broadcast_dims(out, std::span<const Shape* const>(inputs.begin(), inputs.size()), op);
  if (static_cast<int>(m.dims.size()) > kMaxElementwiseRank)
    throw InvalidArgument("[" + std::string(op) + "] the CUDA kernel supports at most " +
                          std::to_string(kMaxElementwiseRank) + " dims after merging, and output " + out.to_string() +
                          " with these inputs needs " + std::to_string(m.dims.size()));
  BroadcastStrides g;
  g.num_inputs = k_count;
  g.n = out.num_elements();
  g.same_shape = true;
  for (const Shape* s : inputs)
    if (s->num_elements() != g.n) g.same_shape = false;
  g.rank = static_cast<int>(m.dims.size());
  for (int d = 0; d < g.rank; ++d) {
    g.dims[d] = m.dims[static_cast<size_t>(d)];
    for (int q = 0; q < k_count; ++q) g.strides[q][d] = m.strides[static_cast<size_t>(q)][static_cast<size_t>(d)];
  }
  g.index32 = g.n <= std::numeric_limits<int32_t>::max();
  return g;
}

int64_t broadcast_offset(const BroadcastStrides& g, int input, int64_t i) {
  int64_t off = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    off += (i % g.dims[d]) * g.strides[input][d];
    i /= g.dims[d];
  }
  return off;
}

LaunchGeometry launch_geometry(int64_t n) {
  if (n <= 0) return {};
  const int64_t blocks = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  return {static_cast<uint32_t>(blocks < kMaxElementwiseBlocks ? blocks : kMaxElementwiseBlocks), kElementwiseThreads};
}

}  // namespace weft::cuda
