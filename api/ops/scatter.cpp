// Front-end of unsorted_segment_sum and its gradient.
#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/array.h"

namespace weft {

Tensor unsorted_segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments,
                            const SourceLocation& loc) {
  static const OpDef& op = op_def("UnsortedSegmentSum");
  return dispatch1(op, {data, segment_ids}, {{"num_segments", num_segments}}, loc);
}

namespace {

// Each data row went into exactly one output row, so its gradient is that row of the output's
// gradient: a gather by the same ids, which yields ids.shape + grad.shape[1:] = data's shape.
// The ids are indices and get no gradient.
std::vector<Tensor> unsorted_segment_sum_grad(const GradContext& g) {
  return {gather(g.grad(), g.input(1), 0), Tensor()};
}

}  // namespace

// Called from register_array_gradients: a family of one op needs no line of its own in
// register_gradients.h.
void register_scatter_gradients() { register_gradient("UnsortedSegmentSum", unsorted_segment_sum_grad); }

}  // namespace weft
