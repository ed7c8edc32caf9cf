// UnsortedSegmentSum: rows of data added into the output rows named by segment_ids (TensorFlow's
// op of the same name). It is the gradient of gather, so it has gather's shape conventions
// mirrored: ids index the leading dims of data, and each id picks a row of the output.
//
// num_segments is an attribute rather than TensorFlow's third input: the output shape then
// follows from the node alone, as for every other weft op. Ids out of range are data, so the
// kernel reports them.
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

std::string describe(const InferContext& ctx, int i) {
  return std::string(dtype_name(ctx.input_dtype(i))) + " " + ctx.input_shape(i).to_string();
}

void infer_unsorted_segment_sum(InferContext& ctx) {
  check_dtype_in(ctx, 0, kRealNumeric);
  const DType idt = ctx.input_dtype(1);
  if (idt != DType::Int32 && idt != DType::Int64)
    ctx.fail("segment_ids must be int32 or int64, got " + describe(ctx, 1));
  const int64_t num_segments = ctx.attrs().get<int64_t>("num_segments");
  if (num_segments < 0) ctx.fail("num_segments must be >= 0, got " + std::to_string(num_segments));
  const Shape& data = ctx.input_shape(0);
  const Shape& ids = ctx.input_shape(1);
  const auto mismatch = [&] {
    ctx.fail("the shape of segment_ids " + describe(ctx, 1) + " must be a prefix of the shape of data " +
             describe(ctx, 0));
  };
  if (ids.rank() > data.rank()) mismatch();
  for (int64_t i = 0; i < ids.rank(); ++i)
    if (ids[i] >= 0 && data[i] >= 0 && ids[i] != data[i]) mismatch();
  Shape out{num_segments};
  for (int64_t i = ids.rank(); i < data.rank(); ++i) out.push_back(data[i]);
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

// One add per data element; data and ids are read once, the output written once.
Cost segment_sum_cost(const InferContext& ctx) {
  const int64_t n = ctx.input_shape(0).num_elements();
  const int64_t k = ctx.input_shape(1).num_elements();
  const int64_t m = ctx.output(0).shape.num_elements();
  if (n < 0 || k < 0 || m < 0) return {};
  const double elem = static_cast<double>(dtype_size(ctx.input_dtype(0)));
  return {static_cast<double>(n),
          elem * static_cast<double>(n + m) + static_cast<double>(k) * dtype_size(ctx.input_dtype(1))};
}

}  // namespace

void register_scatter_defs() {
  op_registry().add({.name = "UnsortedSegmentSum", .display = "unsorted_segment_sum", .min_inputs = 2,
                     .max_inputs = 2, .attrs = {{"num_segments", AttrType::Int}},
                     .infer = infer_unsorted_segment_sum, .cost = segment_sum_cost});
}

}  // namespace weft::defs
