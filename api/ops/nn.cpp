// Front-ends of the activation ops. Their gradients will sit beside them here.
#include "api/ops/nn.h"

namespace weft {

Tensor relu(const Tensor& x, const SourceLocation& loc) {
  static const OpDef& op = op_def("Relu");
  return dispatch1(op, {x}, {}, loc);
}

Tensor sigmoid(const Tensor& x, const SourceLocation& loc) {
  static const OpDef& op = op_def("Sigmoid");
  return dispatch1(op, {x}, {}, loc);
}

Tensor tanh(const Tensor& x, const SourceLocation& loc) {
  static const OpDef& op = op_def("Tanh");
  return dispatch1(op, {x}, {}, loc);
}

Tensor softmax(const Tensor& x, int64_t axis, const SourceLocation& loc) {
  static const OpDef& op = op_def("Softmax");
  return dispatch1(op, {x}, {{"axis", axis}}, loc);
}

Tensor log_softmax(const Tensor& x, int64_t axis, const SourceLocation& loc) {
  static const OpDef& op = op_def("LogSoftmax");
  return dispatch1(op, {x}, {{"axis", axis}}, loc);
}

}  // namespace weft

namespace weft {
// Gradients of this family are being written (autodiff issue); registered here when done.
void register_nn_gradients() {}
}  // namespace weft
