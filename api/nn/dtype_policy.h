// Mixed precision, as Keras's dtype policies:
//
//   nn::set_dtype_policy("mixed_bfloat16");   // layers made from now on compute in bfloat16 and
//   nn::Sequential model{...};                // keep their variables in float32
//   optim::AdamW opt(1e-3);                    // updates the float32 variables
//
//   nn::set_dtype_policy("mixed_float16");    // float16's small range needs loss scaling:
//   optim::LossScaleOptimizer opt(optim::Adam(1e-3));   // (api/optim/loss_scale_optimizer.h)
//
// A layer takes the policy in force when it is made (as in Keras). Under a mixed policy it casts
// its floating-point inputs to the compute dtype, builds its variables in float32 and casts their
// values to the compute dtype where it uses them; the gradients, through the casts, are float32
// like the variables. What needs float32's range stays there: layer and batch normalisation keep
// float32 parameters and compute their statistics in float32, attention's softmax runs in float32
// inside the fused op, and the losses (nn::sparse_softmax_cross_entropy, nn::mean_squared_error)
// cast 16-bit predictions to float32 first while a mixed policy is set.
//
// Policies: "float32" (the default: a layer builds its variables in the dtype of its first input
// and casts nothing, so float64 models stay float64), "mixed_bfloat16" and "mixed_float16".
#pragma once

#include <string>

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft::nn {

struct DTypePolicy {
  std::string name = "float32";
  bool mixed = false;
  DType compute_dtype = DType::Float32;   // under a mixed policy
  DType variable_dtype = DType::Float32;

  // x cast to the compute dtype under a mixed policy when x is floating-point; else x.
  Tensor cast_input(const Tensor& x, const SourceLocation& loc) const;
  // A variable's value cast to the compute dtype under a mixed policy; else the value.
  Tensor cast_variable(const Tensor& value, const SourceLocation& loc) const;
  // The dtype a layer builds its variables in, given its first input's.
  DType variable_dtype_for(DType input) const { return mixed ? variable_dtype : input; }
};

// InvalidArgument for a name other than the three above.
void set_dtype_policy(const std::string& name);
const DTypePolicy& dtype_policy();

namespace detail {
// Makes `policy` the global one while it lives: a layer that builds sub-layers on its first
// call gives them the policy it was made with.
class DTypePolicyScope {
 public:
  explicit DTypePolicyScope(const DTypePolicy& policy);
  ~DTypePolicyScope();
  DTypePolicyScope(const DTypePolicyScope&) = delete;
  DTypePolicyScope& operator=(const DTypePolicyScope&) = delete;

 private:
  DTypePolicy saved_;
};
}  // namespace detail

}  // namespace weft::nn
