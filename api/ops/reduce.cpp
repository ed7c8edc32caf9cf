// Front-ends of the reduce ops. Their gradients will sit beside them here.
#include "api/ops/reduce.h"

namespace weft {

namespace {

Tensor reduce(const OpDef& op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdims,
              const SourceLocation& loc) {
  return dispatch1(op, {x}, {{"axes", axes}, {"keepdims", keepdims}}, loc);
}

}  // namespace

Tensor reduce_sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims, const SourceLocation& loc) {
  static const OpDef& op = op_def("Sum");
  return reduce(op, x, axes, keepdims, loc);
}

Tensor reduce_mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims, const SourceLocation& loc) {
  static const OpDef& op = op_def("Mean");
  return reduce(op, x, axes, keepdims, loc);
}

Tensor reduce_max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims, const SourceLocation& loc) {
  static const OpDef& op = op_def("Max");
  return reduce(op, x, axes, keepdims, loc);
}

Tensor reduce_min(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims, const SourceLocation& loc) {
  static const OpDef& op = op_def("Min");
  return reduce(op, x, axes, keepdims, loc);
}

Tensor argmax(const Tensor& x, int64_t axis, const SourceLocation& loc) {
  static const OpDef& op = op_def("ArgMax");
  return dispatch1(op, {x}, {{"axis", axis}}, loc);
}

}  // namespace weft

namespace weft {
// Gradients of this family are being written (autodiff issue); registered here when done.
void register_reduce_gradients() {}
}  // namespace weft
