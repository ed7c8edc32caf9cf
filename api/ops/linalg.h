// Matrix multiplication.
//
//   matmul(a, b);                         // (m, k) x (k, n) -> (m, n)
//   matmul(a, b, false, /*transpose_b=*/true);
//   matmul(batch_a, batch_b);             // rank > 2: batched over the leading dims (broadcast)
#pragma once

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false,
              const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
