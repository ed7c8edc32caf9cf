#include "kernels/broadcast_dims.h"

#include <string>

#include "runtime/error.h"

namespace weft {

MergedBroadcast merge_broadcast_dims(const Shape& out, std::span<const Shape* const> inputs, std::string_view op) {
  const int64_t r = out.rank();
  const size_t k_count = inputs.size();
  // Full-rank strides per input: the contiguous stride of its dim, 0 where it is broadcast.
  std::vector<std::vector<int64_t>> full(k_count, std::vector<int64_t>(static_cast<size_t>(r), 0));
  for (size_t k = 0; k < k_count; ++k) {
    const Shape& s = *inputs[k];
    if (s.rank() > r)
      throw InvalidArgument("[" + std::string(op) + "] input " + std::to_string(k) + " of shape " + s.to_string() +
                            " has more dims than the output " + out.to_string());
    int64_t stride = 1;
    for (int64_t i = r - 1; i >= 0; --i) {
      const int64_t j = i - (r - s.rank());
      const int64_t d = j >= 0 ? s[j] : 1;
      if (d != out[i] && d != 1)
        throw InvalidArgument("[" + std::string(op) + "] input " + std::to_string(k) + " of shape " + s.to_string() +
                              " does not broadcast to the output " + out.to_string());
      full[k][static_cast<size_t>(i)] = (d == 1 && out[i] != 1) ? 0 : stride;
      stride *= d;
    }
  }
  // Merge dim i into the previous kept dim when every input steps through both as one dim.
  MergedBroadcast m;
  m.strides.resize(k_count);
  for (int64_t i = 0; i < r; ++i) {
    const auto u = static_cast<size_t>(i);
    if (out[i] == 1) continue;
    if (!m.dims.empty()) {
      bool merge = true;
      for (size_t k = 0; k < k_count; ++k)
        if (m.strides[k].back() != full[k][u] * out[i]) merge = false;
      if (merge) {
        m.dims.back() *= out[i];
        for (size_t k = 0; k < k_count; ++k) m.strides[k].back() = full[k][u];
        continue;
      }
    }
    m.dims.push_back(out[i]);
    for (size_t k = 0; k < k_count; ++k) m.strides[k].push_back(full[k][u]);
  }
  if (m.dims.empty()) {
    m.dims.push_back(1);
    for (size_t k = 0; k < k_count; ++k) m.strides[k].push_back(0);
  }
  return m;
}

}  // namespace weft
