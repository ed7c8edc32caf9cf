// clip_by_global_norm and global_norm, and the gradient of GlobalSquaredNorm (the one reduction
// both make over every tensor at once).
#include "api/optim/clipping.h"

#include <cmath>
#include <string>

#include "api/dispatch.h"
#include "api/gradient_registry.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/ops/register_gradients.h"

namespace weft {

namespace {

// The defined tensors, which must share one floating dtype (the single reduction takes one dtype,
// as tf.clip_by_global_norm's stacked norms do).
std::vector<Tensor> defined_of_one_dtype(const std::vector<Tensor>& tensors, const char* fn, const char* what) {
  std::vector<Tensor> out;
  size_t first = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) continue;
    if (out.empty()) first = i;
    if (!is_floating(t.dtype()))
      throw InvalidArgument(std::string("[") + fn + "] " + what + " " + std::to_string(i) + " is " +
                            std::string(dtype_name(t.dtype())) + "; only floating dtypes have a norm here");
    if (!out.empty() && t.dtype() != out.front().dtype())
      throw InvalidArgument(std::string("[") + fn + "] " + what + " " + std::to_string(i) + " is " +
                            std::string(dtype_name(t.dtype())) + " but " + what + " " + std::to_string(first) + " is " +
                            std::string(dtype_name(out.front().dtype())) + ": all must share one dtype");
    out.push_back(t);
  }
  return out;
}

Tensor norm_of(const std::vector<Tensor>& defined, const SourceLocation& loc) {
  if (defined.empty()) return constant(0.f);
  static const OpDef& op = op_def("GlobalSquaredNorm");
  return sqrt(dispatch1(op, std::span<const Tensor>(defined), {}, loc), loc);
}

}  // namespace

Tensor global_norm(const std::vector<Tensor>& tensors, const SourceLocation& loc) {
  return norm_of(defined_of_one_dtype(tensors, "global_norm", "tensor"), loc);
}

ClippedGradients clip_by_global_norm(const std::vector<Tensor>& grads, double clip_norm, const SourceLocation& loc) {
  if (!(clip_norm > 0) || !std::isfinite(clip_norm))
    throw InvalidArgument("[clip_by_global_norm] clip_norm must be a positive finite number, got " +
                          std::to_string(clip_norm));
  ClippedGradients out;
  out.global_norm = norm_of(defined_of_one_dtype(grads, "clip_by_global_norm", "gradient"), loc);
  if (grads.empty()) return out;
  // clip_norm / max(norm, clip_norm) is exactly 1 within the norm, so those gradients pass
  // unchanged. (norm - norm) adds 0 to a finite norm and NaN to an infinite or NaN one, which
  // max() alone would turn into a scale of 0 (or 1 for NaN), hiding the overflow.
  const Tensor& norm = out.global_norm;
  Tensor scale = add(div(clip_norm, maximum(norm, clip_norm, loc), loc), sub(norm, norm, loc), loc);
  out.clipped.reserve(grads.size());
  for (const Tensor& g : grads) out.clipped.push_back(g.defined() ? mul(g, scale, loc) : Tensor());
  return out;
}

// ---- gradients -------------------------------------------------------------------------------

namespace {

// d/dx_i of sum(x_j^2) = 2 x_i.
std::vector<Tensor> global_squared_norm_grad(const GradContext& g) {
  Tensor twice = mul(g.grad(), 2.0);
  std::vector<Tensor> out;
  for (int i = 0; i < static_cast<int>(g.inputs.size()); ++i) out.push_back(g.needs(i) ? mul(g.input(i), twice) : Tensor());
  return out;
}

}  // namespace

void register_clipping_gradients() { register_gradient("GlobalSquaredNorm", global_squared_norm_grad); }

}  // namespace weft
