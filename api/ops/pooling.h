// Pooling over NHWC images.
//
//   Tensor p = max_pool2d(x, {2, 2}, {2, 2}, "VALID");
//   Tensor a = avg_pool2d(x, {3, 3}, {1, 1}, "SAME");   // SAME: averages over the valid cells only
//
// ksize and strides are {height, width}; padding "SAME" or "VALID" (any case), as conv2d's.
#pragma once

#include <string>
#include <vector>

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft {

Tensor max_pool2d(const Tensor& x, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  const std::string& padding = "VALID", const SourceLocation& loc = SourceLocation::current());
Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  const std::string& padding = "VALID", const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
