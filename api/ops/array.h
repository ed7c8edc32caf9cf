// Shape and indexing ops.
//
//   reshape(x, {2, -1});  transpose(x);  transpose(x, {0, 2, 1});
//   concat({a, b}, 0);    slice(x, {0, 1}, {2, -1});   gather(params, indices, 1);
//   one_hot(labels, 10);  expand_dims(x, 0);  squeeze(x);  identity(x, "y");
//   split(x, 3, -1);      stack({a, b}, 0);
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft {

// One dim of `shape` may be -1: inferred from the element count.
Tensor reshape(const Tensor& x, const Shape& shape, const SourceLocation& loc = SourceLocation::current());
// perm empty: reverse the dims (a matrix transpose for rank 2).
Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm = {},
                 const SourceLocation& loc = SourceLocation::current());
Tensor concat(const std::vector<Tensor>& values, int64_t axis, const SourceLocation& loc = SourceLocation::current());
// `num` equal parts of x along `axis` (whose size must be known and divisible by num), as slices.
std::vector<Tensor> split(const Tensor& x, int64_t num, int64_t axis = 0,
                          const SourceLocation& loc = SourceLocation::current());
// The values (of one shape) along a new axis `axis` of the result (-1: a new last axis).
Tensor stack(const std::vector<Tensor>& values, int64_t axis = 0, const SourceLocation& loc = SourceLocation::current());
// size[i] == -1 takes everything from begin[i] to the end of dim i.
Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size,
             const SourceLocation& loc = SourceLocation::current());
// Rows (or slices along `axis`) of params picked by int32/int64 indices; an index out of range
// is an InvalidArgument naming it (on a GPU, raised at the next read of a value from that GPU:
// docs/gpu.md, "Errors found on the GPU").
Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis = 0,
              const SourceLocation& loc = SourceLocation::current());
// float32 one-hot vectors along a new last axis; indices outside [0, depth) give all zeros.
Tensor one_hot(const Tensor& indices, int64_t depth, const SourceLocation& loc = SourceLocation::current());
Tensor expand_dims(const Tensor& x, int64_t axis, const SourceLocation& loc = SourceLocation::current());
// axes empty: drop every dim of size 1.
Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axes = {},
               const SourceLocation& loc = SourceLocation::current());
Tensor identity(const Tensor& x, const std::string& name = "", const SourceLocation& loc = SourceLocation::current());
// The same values; gradients do not flow through it.
Tensor stop_gradient(const Tensor& x, const SourceLocation& loc = SourceLocation::current());
// An op: writes `message` and the value to stderr every time it runs (eager or traced); returns x.
Tensor print(const Tensor& x, const std::string& message = "", const SourceLocation& loc = SourceLocation::current());

// x stretched to `shape` by NumPy broadcasting rules (no copy of x itself is needed first).
Tensor broadcast_to(const Tensor& x, const Shape& shape, const SourceLocation& loc = SourceLocation::current());
// The run-time-shape forms, for graphs traced with unknown dims: x broadcast to, or reshaped
// to, the shape `like` has when the graph runs; and the element count of x as a scalar.
Tensor broadcast_like(const Tensor& x, const Tensor& like, const SourceLocation& loc = SourceLocation::current());
Tensor reshape_like(const Tensor& x, const Tensor& like, const SourceLocation& loc = SourceLocation::current());
Tensor size_of(const Tensor& x, DType dtype = int64, const SourceLocation& loc = SourceLocation::current());

// TensorFlow's unsorted_segment_sum: output[segment_ids[i...], ...] += data[i..., ...], with
// output shape (num_segments,) + data.shape[segment_ids.rank:]. segment_ids (int32/int64) must have
// a prefix of data's shape; an id outside [0, num_segments) is an InvalidArgument naming it (on a
// GPU, at the next read of a value, as for gather). Rows are added in increasing order on every
// device, so results have the same bits everywhere.
// Segments no id names are zeros. data: float32, float64, int32 or int64.
Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments,
                            const SourceLocation& loc = SourceLocation::current());

// x surrounded by zeros: paddings[i] = (before, after) elements for dim i, one pair per dim, none
// negative. Any dtype.
Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& paddings,
           const SourceLocation& loc = SourceLocation::current());
// The same with the befores and the afters as two lists.
Tensor pad(const Tensor& x, const std::vector<int64_t>& before, const std::vector<int64_t>& after,
           const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
