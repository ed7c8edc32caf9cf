// Pad: x surrounded by zeros, `before` and `after` elements per dim (TensorFlow's Pad in its
// constant-zero mode). It is the gradient of slice.
//
// The paddings are one flat IntList attribute, [before_0, after_0, before_1, after_1, ...], the
// row-major layout of TensorFlow's [rank, 2] paddings tensor, so a node says all about itself.
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

std::string list_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void infer_pad(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  const auto& p = ctx.attrs().get<std::vector<int64_t>>("paddings");
  const std::string input = std::string(dtype_name(ctx.input_dtype(0))) + " " + in.to_string();
  if (static_cast<int64_t>(p.size()) != 2 * in.rank())
    ctx.fail("paddings " + list_string(p) + " need a (before, after) pair per dim of the input " + input + ": " +
             std::to_string(2 * in.rank()) + " numbers, got " + std::to_string(p.size()));
  Shape out;
  for (int64_t i = 0; i < in.rank(); ++i) {
    const int64_t b = p[2 * i], a = p[2 * i + 1];
    if (b < 0 || a < 0)
      ctx.fail("paddings must be >= 0, got (" + std::to_string(b) + ", " + std::to_string(a) + ") for dim " +
               std::to_string(i) + " of the input " + input);
    int64_t d = in[i];
    if (d >= 0 && (__builtin_add_overflow(d, b, &d) || __builtin_add_overflow(d, a, &d)))
      ctx.fail("padding dim " + std::to_string(i) + " of the input " + input + " by " + list_string(p) +
               " overflows int64");
    out.push_back(d);
  }
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

// Every output byte is written once; the input bytes are read once.
Cost pad_cost(const InferContext& ctx) {
  const int64_t n = ctx.input_shape(0).num_elements();
  const int64_t m = ctx.output(0).shape.num_elements();
  if (n < 0 || m < 0) return {};
  return {0, static_cast<double>(n + m) * dtype_size(ctx.input_dtype(0))};
}

}  // namespace

void register_pad_defs() {
  op_registry().add({.name = "Pad", .display = "pad", .min_inputs = 1, .max_inputs = 1,
                     .attrs = {{"paddings", AttrType::IntList}}, .infer = infer_pad, .cost = pad_cost});
}

}  // namespace weft::defs
