// Front-ends of the array ops. Their gradients will sit beside them here.
#include "api/ops/array.h"

namespace weft {

Tensor reshape(const Tensor& x, const Shape& shape, const SourceLocation& loc) {
  static const OpDef& op = op_def("Reshape");
  return dispatch1(op, {x}, {{"shape", shape}}, loc);
}

Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm, const SourceLocation& loc) {
  static const OpDef& op = op_def("Transpose");
  return dispatch1(op, {x}, {{"perm", perm}}, loc);
}

Tensor concat(const std::vector<Tensor>& values, int64_t axis, const SourceLocation& loc) {
  static const OpDef& op = op_def("ConcatV2");
  if (values.empty()) throw InvalidArgument("[concat] needs at least one tensor to concatenate, got none");
  return dispatch1(op, std::span<const Tensor>(values), {{"axis", axis}}, loc);
}

Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size,
             const SourceLocation& loc) {
  static const OpDef& op = op_def("Slice");
  return dispatch1(op, {x}, {{"begin", begin}, {"size", size}}, loc);
}

Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis, const SourceLocation& loc) {
  static const OpDef& op = op_def("GatherV2");
  return dispatch1(op, {params, indices}, {{"axis", axis}}, loc);
}

Tensor one_hot(const Tensor& indices, int64_t depth, const SourceLocation& loc) {
  static const OpDef& op = op_def("OneHot");
  return dispatch1(op, {indices}, {{"depth", depth}}, loc);
}

Tensor expand_dims(const Tensor& x, int64_t axis, const SourceLocation& loc) {
  static const OpDef& op = op_def("ExpandDims");
  return dispatch1(op, {x}, {{"axis", axis}}, loc);
}

Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axes, const SourceLocation& loc) {
  static const OpDef& op = op_def("Squeeze");
  return dispatch1(op, {x}, {{"axes", axes}}, loc);
}

Tensor identity(const Tensor& x, const std::string& name, const SourceLocation& loc) {
  static const OpDef& op = op_def("Identity");
  // The requested node name travels as "_name" (underscore: not part of the op's semantics) for
  // the graph builder to honour; eager execution ignores it.
  if (name.empty()) return dispatch1(op, {x}, {}, loc);
  return dispatch1(op, {x}, {{"_name", name}}, loc);
}

Tensor stop_gradient(const Tensor& x, const SourceLocation& loc) {
  static const OpDef& op = op_def("StopGradient");
  return dispatch1(op, {x}, {}, loc);
}

Tensor print(const Tensor& x, const std::string& message, const SourceLocation& loc) {
  static const OpDef& op = op_def("Print");
  return dispatch1(op, {x}, {{"message", message}}, loc);
}

}  // namespace weft

namespace weft {
// Gradients of this family are being written (autodiff issue); registered here when done.
void register_array_gradients() {}
}  // namespace weft
