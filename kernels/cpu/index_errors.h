// The messages of kernels that refuse out-of-range indices (GatherV2, UnsortedSegmentSum), shared
// by the CPU and CUDA kernels so that both fail with the same words. Plain C++, header only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/shape.h"

namespace weft::cpu {

// "indices[1, 2]" for a flat position in a tensor of the given shape named `what`.
inline std::string element_name(std::string_view what, int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank()));
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = flat % shape[d];
    flat /= shape[d];
  }
  std::string s = std::string(what) + "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

// The first position whose value is outside [0, limit), or -1.
template <class I>
int64_t first_out_of_range(const I* values, int64_t count, int64_t limit) {
  for (int64_t j = 0; j < count; ++j)
    if (values[j] < 0 || static_cast<int64_t>(values[j]) >= limit) return j;
  return -1;
}

inline std::string gather_index_message(int64_t flat, const Shape& indices, int64_t value, int64_t axis,
                                        const Shape& params, int64_t limit) {
  return element_name("indices", flat, indices) + " = " + std::to_string(value) + " is out of range: axis " +
         std::to_string(axis) + " of params " + params.to_string() + " has size " + std::to_string(limit) +
         ", so valid indices are in [0, " + std::to_string(limit) + ")";
}

inline std::string segment_id_message(int64_t flat, const Shape& ids, int64_t value, int64_t segments) {
  return element_name("segment_ids", flat, ids) + " = " + std::to_string(value) + " is out of range: num_segments is " +
         std::to_string(segments) + ", so valid ids are in [0, " + std::to_string(segments) + ")";
}

}  // namespace weft::cpu
