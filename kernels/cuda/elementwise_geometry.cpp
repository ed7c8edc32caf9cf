#include "kernels/cuda/elementwise_geometry.h"

#include <limits>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace weft::cuda {

BroadcastStrides broadcast_strides(const Shape& out, std::initializer_list<const Shape*> inputs, std::string_view op) {
  const std::string where = "[" + std::string(op) + "] ";
  const int k_count = static_cast<int>(inputs.size());
  if (k_count < 1 || k_count > kMaxElementwiseInputs)
    throw InvalidArgument(where + "a CUDA elementwise kernel takes 1 to " + std::to_string(kMaxElementwiseInputs) +
                          " inputs, got " + std::to_string(k_count));
  BroadcastStrides g;
  g.num_inputs = k_count;
  g.n = out.num_elements();
  const int64_t r = out.rank();

  // Full-rank strides per input: the contiguous stride of its dim, 0 where it is broadcast.
  std::vector<std::vector<int64_t>> full(k_count, std::vector<int64_t>(r, 0));
  g.same_shape = true;
  int k = 0;
  for (const Shape* s : inputs) {
    if (s->rank() > r)
      throw InvalidArgument(where + "input " + std::to_string(k) + " of shape " + s->to_string() +
                            " has more dims than the output " + out.to_string());
    if (s->num_elements() != g.n) g.same_shape = false;
    int64_t stride = 1;
    for (int64_t i = r - 1; i >= 0; --i) {
      const int64_t j = i - (r - s->rank());
      const int64_t d = j >= 0 ? (*s)[j] : 1;
      if (d != out[i] && d != 1)
        throw InvalidArgument(where + "input " + std::to_string(k) + " of shape " + s->to_string() +
                              " does not broadcast to the output " + out.to_string());
      full[k][i] = (d == 1 && out[i] != 1) ? 0 : stride;
      stride *= d;
    }
    ++k;
  }

  // Merge dim i into the previous kept dim when every input steps through both as one dim.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> st(k_count);
  for (int64_t i = 0; i < r; ++i) {
    if (out[i] == 1) continue;  // contributes nothing to any offset
    if (!dims.empty()) {
      bool merge = true;
      for (int q = 0; q < k_count; ++q)
        if (st[q].back() != full[q][i] * out[i]) merge = false;
      if (merge) {
        dims.back() *= out[i];
        for (int q = 0; q < k_count; ++q) st[q].back() = full[q][i];
        continue;
      }
    }
    dims.push_back(out[i]);
    for (int q = 0; q < k_count; ++q) st[q].push_back(full[q][i]);
  }
  if (dims.empty()) {  // a scalar output, or only 1s (or a 0 dim is never dropped, see above)
    dims.push_back(1);
    for (int q = 0; q < k_count; ++q) st[q].push_back(0);
  }
  if (static_cast<int>(dims.size()) > kMaxElementwiseRank)
    throw InvalidArgument(where + "the CUDA kernel supports at most " + std::to_string(kMaxElementwiseRank) +
                          " dims after merging, and output " + out.to_string() + " with these inputs needs " +
                          std::to_string(dims.size()));
  g.rank = static_cast<int>(dims.size());
  for (int d = 0; d < g.rank; ++d) {
    g.dims[d] = dims[d];
    for (int q = 0; q < k_count; ++q) g.strides[q][d] = st[q][d];
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
