#include "api/nn/dtype_policy.h"

#include "api/ops/math.h"
#include "runtime/error.h"

namespace weft::nn {

namespace {
DTypePolicy& global_policy() {
  static DTypePolicy policy;
  return policy;
}
}  // namespace

Tensor DTypePolicy::cast_input(const Tensor& x, const SourceLocation& loc) const {
  if (!mixed || !x.defined() || !is_floating(x.dtype()) || x.dtype() == compute_dtype) return x;
  return cast(x, compute_dtype, loc);
}

Tensor DTypePolicy::cast_variable(const Tensor& value, const SourceLocation& loc) const {
  if (!mixed || value.dtype() == compute_dtype) return value;
  return cast(value, compute_dtype, loc);
}

void set_dtype_policy(const std::string& name) {
  DTypePolicy p;
  p.name = name;
  if (name == "float32") {
  } else if (name == "mixed_bfloat16") {
    p.mixed = true;
    p.compute_dtype = DType::BFloat16;
  } else if (name == "mixed_float16") {
    p.mixed = true;
    p.compute_dtype = DType::Float16;
  } else {
    throw InvalidArgument("[set_dtype_policy] unknown policy '" + name +
                          "' (known: float32, mixed_bfloat16, mixed_float16)");
  }
  global_policy() = p;
}

const DTypePolicy& dtype_policy() { return global_policy(); }

detail::DTypePolicyScope::DTypePolicyScope(const DTypePolicy& policy) : saved_(global_policy()) {
  global_policy() = policy;
}
detail::DTypePolicyScope::~DTypePolicyScope() { global_policy() = saved_; }

}  // namespace weft::nn
