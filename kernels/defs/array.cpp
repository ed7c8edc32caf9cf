// Definitions of the shape and indexing ops.
//
// Every non-tensor argument (target shape, perm, axis, begin/size, depth) is an attribute, so a
// graph node says everything about itself. Infer functions accept unknown dims (-1) and check
// whatever the known dims allow; what only the data can reveal (a gather index) is checked by
// the kernel.
#include <algorithm>

#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

// Like Shape::to_string but keeps -1 literally: it is what the user wrote in a target shape.
std::string dims_string(std::span<const int64_t> d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(d[i]);
  }
  return s + (d.size() == 1 ? ",)" : ")");
}

std::string list_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// "float32 (2, 3)": how messages name an input.
std::string describe(const InferContext& ctx, int i) {
  return std::string(dtype_name(ctx.input_dtype(i))) + " " + ctx.input_shape(i).to_string();
}

Cost view_cost(const InferContext&) { return {}; }

// Pure data movement: every output byte is read once and written once.
Cost copy_cost(const InferContext& ctx) {
  int64_t n = ctx.output(0).shape.num_elements();
  return {0, n > 0 ? 2.0 * static_cast<double>(n) * dtype_size(ctx.output(0).dtype) : 0};
}

void infer_reshape(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  const Shape& target = ctx.attrs().get<Shape>("shape");
  const int64_t n = in.num_elements();
  auto cannot = [&](const std::string& why) {
    ctx.fail("cannot reshape " + in.to_string() + " (" + (n < 0 ? std::string("unknown number of") : std::to_string(n)) +
             " elements) into " + dims_string(target.dims()) + why);
  };
  int64_t infer_at = -1;
  int64_t known = 1;
  for (int64_t i = 0; i < target.rank(); ++i) {
    int64_t d = target[i];
    if (d == -1) {
      if (infer_at >= 0) cannot(": only one dim may be -1");
      infer_at = i;
    } else if (d < 0) {
      cannot(": dim " + std::to_string(i) + " is negative");
    } else if (__builtin_mul_overflow(known, d, &known)) {
      cannot(": the target has more elements than int64 can count");
    }
  }
  Shape out = target;
  if (n >= 0) {
    if (infer_at >= 0) {
      if (known == 0) cannot(n == 0 ? ": the -1 is ambiguous when the other dims multiply to 0" : "");
      if (n % known != 0) cannot("");
      out[infer_at] = n / known;
    } else if (known != n) {
      cannot("");
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

void infer_transpose(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  const int64_t r = in.rank();
  std::vector<int64_t> perm = ctx.attrs().get_or<std::vector<int64_t>>("perm", {});
  if (perm.empty()) {
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  } else if (static_cast<int64_t>(perm.size()) != r) {
    ctx.fail("perm " + list_string(perm) + " has " + std::to_string(perm.size()) + " entries but the input " +
             describe(ctx, 0) + " has rank " + std::to_string(r));
  }
  std::vector<bool> seen(r, false);
  Shape out;
  for (int64_t p : perm) {
    if (p < -r || p >= r)
      ctx.fail("perm " + list_string(perm) + " names axis " + std::to_string(p) + ", out of range for the input " +
               describe(ctx, 0) + " (valid: " + std::to_string(-r) + " to " + std::to_string(r - 1) + ")");
    int64_t q = p < 0 ? p + r : p;
    if (seen[q]) ctx.fail("perm " + list_string(perm) + " names axis " + std::to_string(q) + " twice");
    seen[q] = true;
    out.push_back(in[q]);
  }
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

void infer_concat(InferContext& ctx) {
  const int n = ctx.num_inputs();
  if (n == 0) ctx.fail("needs at least one tensor to concatenate");
  check_same_dtype(ctx, 0, n);
  const Shape& first = ctx.input_shape(0);
  const int64_t r = first.rank();
  if (r == 0) ctx.fail("cannot concatenate scalars (input 0 is " + describe(ctx, 0) + "); expand_dims them first");
  const int64_t axis = normalize_axis(ctx, ctx.attrs().get<int64_t>("axis"), r);
  Shape out = first;
  for (int i = 1; i < n; ++i) {
    const Shape& s = ctx.input_shape(i);
    if (s.rank() != r)
      ctx.fail("all inputs need the same rank: input 0 is " + describe(ctx, 0) + " but input " + std::to_string(i) +
               " is " + describe(ctx, i));
    for (int64_t d = 0; d < r; ++d) {
      if (d == axis) {
        out[d] = (out[d] < 0 || s[d] < 0) ? -1 : out[d] + s[d];
      } else if (out[d] < 0) {
        out[d] = s[d];
      } else if (s[d] >= 0 && s[d] != out[d]) {
        ctx.fail("input " + std::to_string(i) + " " + describe(ctx, i) + " differs from input 0 " + describe(ctx, 0) +
                 " in dim " + std::to_string(d) + ", which is not the concat axis (" + std::to_string(axis) + ")");
      }
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

void infer_slice(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  const auto& begin = ctx.attrs().get<std::vector<int64_t>>("begin");
  const auto& size = ctx.attrs().get<std::vector<int64_t>>("size");
  const int64_t r = in.rank();
  if (static_cast<int64_t>(begin.size()) != r || static_cast<int64_t>(size.size()) != r)
    ctx.fail("begin " + list_string(begin) + " and size " + list_string(size) + " need one entry per dim of the input " +
             describe(ctx, 0));
  Shape out;
  for (int64_t i = 0; i < r; ++i) {
    const int64_t b = begin[i], s = size[i], d = in[i];
    const std::string where = " for dim " + std::to_string(i) + " of the input " + describe(ctx, 0) +
                              " (begin " + list_string(begin) + ", size " + list_string(size) + ")";
    if (b < 0) ctx.fail("begin[" + std::to_string(i) + "] = " + std::to_string(b) + " is negative" + where);
    if (s < -1) ctx.fail("size[" + std::to_string(i) + "] = " + std::to_string(s) + " is invalid (-1 means to the end)" + where);
    if (d < 0) {
      out.push_back(s);  // -1 stays unknown; bounds are checked when the dim is known
      continue;
    }
    if (b > d) ctx.fail("begin[" + std::to_string(i) + "] = " + std::to_string(b) + " is out of bounds" + where);
    if (s >= 0 && s > d - b)
      ctx.fail("begin[" + std::to_string(i) + "] + size[" + std::to_string(i) + "] = " + std::to_string(b + s) +
               " exceeds the dim size " + std::to_string(d) + where);
    out.push_back(s < 0 ? d - b : s);
  }
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

// num_split equal parts of the input along axis, each a window of it.
void infer_split(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  const int64_t r = in.rank();
  const int64_t axis = normalize_axis(ctx, ctx.attrs().get<int64_t>("axis"), r);
  const int64_t num = ctx.attrs().get<int64_t>("num_split");
  if (num <= 0) ctx.fail("num_split = " + std::to_string(num) + " must be positive");
  const int64_t d = in[axis];
  if (d >= 0 && d % num != 0)
    ctx.fail("cannot split dim " + std::to_string(axis) + " of the input " + describe(ctx, 0) + " into " +
             std::to_string(num) + " equal parts");
  Shape part = in;
  part[axis] = d < 0 ? -1 : d / num;
  ctx.set_num_outputs(static_cast<int>(num));
  for (int i = 0; i < num; ++i) ctx.set_output(i, ctx.input_dtype(0), part);
}

void infer_gather(InferContext& ctx) {
  const DType idt = ctx.input_dtype(1);
  if (idt != DType::Int32 && idt != DType::Int64)
    ctx.fail("indices must be int32 or int64, got " + describe(ctx, 1));
  const Shape& params = ctx.input_shape(0);
  if (params.rank() == 0) ctx.fail("params must have rank >= 1, got " + describe(ctx, 0));
  const int64_t axis = normalize_axis(ctx, ctx.attrs().get_or<int64_t>("axis", 0), params.rank());
  Shape out;
  for (int64_t i = 0; i < axis; ++i) out.push_back(params[i]);
  for (int64_t d : ctx.input_shape(1)) out.push_back(d);
  for (int64_t i = axis + 1; i < params.rank(); ++i) out.push_back(params[i]);
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

void infer_one_hot(InferContext& ctx) {
  if (!is_integer(ctx.input_dtype(0)))
    ctx.fail("indices must have an integer dtype (int8, uint8, int32, int64), got " + describe(ctx, 0));
  const int64_t depth = ctx.attrs().get<int64_t>("depth");
  if (depth < 0) ctx.fail("depth must be >= 0, got " + std::to_string(depth));
  Shape out = ctx.input_shape(0);
  out.push_back(depth);
  ctx.set_output(0, DType::Float32, std::move(out));
}

void infer_expand_dims(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  const int64_t r = in.rank();
  int64_t axis = ctx.attrs().get<int64_t>("axis");
  if (axis < -r - 1 || axis > r)
    ctx.fail("axis " + std::to_string(axis) + " is out of range for the input " + describe(ctx, 0) + " (valid: " +
             std::to_string(-r - 1) + " to " + std::to_string(r) + ")");
  if (axis < 0) axis += r + 1;
  Shape out;
  for (int64_t i = 0; i < r; ++i) {
    if (i == axis) out.push_back(1);
    out.push_back(in[i]);
  }
  if (axis == r) out.push_back(1);
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

void infer_squeeze(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  const int64_t r = in.rank();
  const auto axes = ctx.attrs().get_or<std::vector<int64_t>>("axes", {});
  std::vector<bool> drop(r, false);
  if (axes.empty()) {
    for (int64_t i = 0; i < r; ++i) {
      // Shapes have a fixed rank, so a dim that may or may not be 1 cannot be decided here.
      if (in[i] < 0)
        ctx.fail("dim " + std::to_string(i) + " of the input " + describe(ctx, 0) +
                 " is unknown, so it is unclear whether to drop it; pass the axes to squeeze");
      drop[i] = in[i] == 1;
    }
  } else {
    for (int64_t a : axes) {
      int64_t q = normalize_axis(ctx, a, r);
      if (in[q] >= 0 && in[q] != 1)
        ctx.fail("cannot squeeze dim " + std::to_string(q) + " of the input " + describe(ctx, 0) + ": its size is " +
                 std::to_string(in[q]) + ", not 1");
      drop[q] = true;
    }
  }
  Shape out;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[i]) out.push_back(in[i]);
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

void add(OpDef def) { op_registry().add(std::move(def)); }

}  // namespace

void register_array_defs() {
  // Views: output 0 shares input 0's buffer, so they need no kernel and cost nothing to place.
  add({.name = "Reshape", .display = "reshape", .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"shape", AttrType::Shape}}, .infer = infer_reshape, .cost = view_cost, .flags = kForwardsInput});
  add({.name = "ExpandDims", .display = "expand_dims", .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"axis", AttrType::Int}}, .infer = infer_expand_dims, .cost = view_cost, .flags = kForwardsInput});
  add({.name = "Squeeze", .display = "squeeze", .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"axes", AttrType::IntList, false}}, .infer = infer_squeeze, .cost = view_cost,
       .flags = kForwardsInput});
  add({.name = "Identity", .display = "identity", .min_inputs = 1, .max_inputs = 1, .infer = infer_same_as_input,
       .cost = view_cost, .flags = kForwardsInput});
  // TensorFlow registers StopGradient as not differentiable: no gradient flows back through it.
  add({.name = "StopGradient", .display = "stop_gradient", .min_inputs = 1, .max_inputs = 1,
       .infer = infer_same_as_input, .cost = view_cost, .flags = kForwardsInput | kNotDifferentiable});
  // Stateful: it must print on every run even though its output is just its input.
  add({.name = "Print", .display = "print", .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"message", AttrType::String, false}}, .infer = infer_same_as_input, .cost = view_cost,
       .flags = kForwardsInput | kStateful | kSideEffect});

  // Copies.
  add({.name = "Transpose", .display = "transpose", .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"perm", AttrType::IntList, false}}, .infer = infer_transpose, .cost = copy_cost});
  add({.name = "ConcatV2", .display = "concat", .min_inputs = 1, .max_inputs = -1, .attrs = {{"axis", AttrType::Int}},
       .infer = infer_concat, .cost = copy_cost});
  add({.name = "Slice", .display = "slice", .min_inputs = 1, .max_inputs = 1,
       .attrs = {{"begin", AttrType::IntList}, {"size", AttrType::IntList}}, .infer = infer_slice, .cost = copy_cost});
  // One node for all the parts, so that its gradient is one concat (a slice's is a pad, and the
  // parts' pads then added up: four times the traffic in a transformer's q, k, v split).
  add({.name = "Split", .display = "split", .min_inputs = 1, .max_inputs = 1, .num_outputs = -1,
       .attrs = {{"axis", AttrType::Int}, {"num_split", AttrType::Int}}, .infer = infer_split, .cost = copy_cost});
  add({.name = "GatherV2", .display = "gather", .min_inputs = 2, .max_inputs = 2,
       .attrs = {{"axis", AttrType::Int, false}}, .infer = infer_gather, .cost = copy_cost});
  add({.name = "OneHot", .display = "one_hot", .min_inputs = 1, .max_inputs = 1, .attrs = {{"depth", AttrType::Int}},
       .infer = infer_one_hot, .cost = copy_cost, .flags = kNotDifferentiable});
}

}  // namespace weft::defs
