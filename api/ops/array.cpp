// Front-ends of the array ops and, below them, their gradients.
#include "api/ops/array.h"

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/register_gradients.h"

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

// Split's shape inference checks the axis and that the dim divides into num parts.
std::vector<Tensor> split(const Tensor& x, int64_t num, int64_t axis, const SourceLocation& loc) {
  static const OpDef& op = op_def("Split");
  const Tensor in[] = {x};
  return dispatch(op, in, {{"axis", axis}, {"num_split", num}}, loc);
}

Tensor stack(const std::vector<Tensor>& values, int64_t axis, const SourceLocation& loc) {
  if (values.empty()) throw InvalidArgument("[stack] needs at least one tensor to stack, got none");
  const Shape& first = values[0].shape();
  for (const Tensor& v : values)
    if (v.shape() != first)
      throw InvalidArgument("[stack] every tensor must have one shape: " + first.to_string() + " and " +
                            v.shape().to_string() + " differ");
  const int64_t rank = first.rank() + 1;
  if (axis < -rank || axis >= rank)
    throw InvalidArgument("[stack] axis " + std::to_string(axis) + " is out of range for a result of rank " +
                          std::to_string(rank));
  if (axis < 0) axis += rank;
  std::vector<Tensor> expanded;
  for (const Tensor& v : values) expanded.push_back(expand_dims(v, axis, loc));
  return expanded.size() == 1 ? expanded[0] : concat(expanded, axis, loc);
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

// ---- gradients -------------------------------------------------------------------------------
//
// Every array op only moves elements, so each gradient moves the output's gradient back to where
// the elements came from, with the same front-end ops; the gradients are thereby differentiable
// again (higher-order gradients) and work under any device or mode the ops do.

namespace weft {

// pad and unsorted_segment_sum are array ops whose front-ends and gradients live in their own
// files (api/ops/pad.cpp, api/ops/scatter.cpp); they register with this family.
void register_pad_gradients();
void register_scatter_gradients();

namespace {

int64_t normalized(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// Reshape, ExpandDims and Squeeze keep the elements in order: the gradient is the output's,
// given the input's shape back.
std::vector<Tensor> reshape_back_grad(const GradContext& g) { return {reshape_like(g.grad(), g.input(0))}; }

std::vector<Tensor> pass_through_grad(const GradContext& g) { return {g.grad()}; }

// Output dim i is input dim perm[i], so the inverse permutation moves every dim back.
std::vector<Tensor> transpose_grad(const GradContext& g) {
  const int64_t r = g.input(0).rank();
  std::vector<int64_t> perm = g.attrs.get_or<std::vector<int64_t>>("perm", {});
  if (perm.empty()) return {transpose(g.grad())};  // reversing the dims is its own inverse
  std::vector<int64_t> inverse(r);
  for (int64_t i = 0; i < r; ++i) inverse[normalized(perm[i], r)] = i;
  return {transpose(g.grad(), inverse)};
}

// Input k occupies its own window of the output along the axis.
std::vector<Tensor> concat_grad(const GradContext& g) {
  const int64_t r = g.input(0).rank();
  const int64_t axis = normalized(g.attrs.get<int64_t>("axis"), r);
  std::vector<Tensor> grads;
  std::vector<int64_t> begin(r, 0);
  for (const Tensor& x : g.inputs) {
    std::vector<int64_t> size = x.shape().to_vector();
    grads.push_back(slice(g.grad(), begin, size));
    begin[axis] += size[axis];
  }
  return grads;
}

// The parts lie side by side along the axis: their gradients, concatenated (zeros where none
// arrived, as output_grads holds them).
std::vector<Tensor> split_grad(const GradContext& g) {
  const int64_t axis = normalized(g.attrs.get<int64_t>("axis"), g.input(0).rank());
  return {concat(std::vector<Tensor>(g.output_grads.begin(), g.output_grads.end()), axis)};
}

// The slice is a window of the input; everything outside it gets zero.
std::vector<Tensor> slice_grad(const GradContext& g) {
  const Shape& in = g.input(0).shape();
  const Shape& out = g.output(0).shape();  // size -1 already resolved
  const auto& begin = g.attrs.get<std::vector<int64_t>>("begin");
  std::vector<std::pair<int64_t, int64_t>> paddings;
  for (int64_t i = 0; i < in.rank(); ++i) paddings.emplace_back(begin[i], in[i] - begin[i] - out[i]);
  return {pad(g.grad(), paddings)};
}

// Each output slice came from params slice indices[j] along the axis; repeated indices add up,
// which is exactly unsorted_segment_sum with the indices as segment ids. It sums along the
// leading dim, so for axis > 0 the gradient is viewed as (outer, indices, inner) and the index
// dim moved first and back again. The indices get no gradient.
std::vector<Tensor> gather_grad(const GradContext& g) {
  const Tensor& params = g.input(0);
  const Tensor& indices = g.input(1);
  const Shape& p = params.shape();
  const int64_t axis = normalized(g.attrs.get_or<int64_t>("axis", 0), p.rank());
  if (axis == 0) return {unsorted_segment_sum(g.grad(), indices, p[0]), Tensor()};
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= p[i];
  for (int64_t i = axis + 1; i < p.rank(); ++i) inner *= p[i];
  const int64_t n = indices.size();
  Tensor index_first = transpose(reshape(g.grad(), {outer, n, inner}), {1, 0, 2});
  Tensor summed = unsorted_segment_sum(index_first, reshape(indices, {n}), p[axis]);  // (p[axis], outer, inner)
  return {reshape(transpose(summed, {1, 0, 2}), p), Tensor()};
}

}  // namespace

void register_array_gradients() {
  register_gradient("Reshape", reshape_back_grad);
  register_gradient("ExpandDims", reshape_back_grad);
  register_gradient("Squeeze", reshape_back_grad);
  register_gradient("Identity", pass_through_grad);
  register_gradient("Print", pass_through_grad);
  register_gradient("Transpose", transpose_grad);
  register_gradient("ConcatV2", concat_grad);
  register_gradient("Slice", slice_grad);
  register_gradient("Split", split_grad);
  register_gradient("GatherV2", gather_grad);
  // StopGradient and OneHot are kNotDifferentiable: the tape never records them.
  register_pad_gradients();
  register_scatter_gradients();
}

}  // namespace weft
