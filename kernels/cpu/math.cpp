// CPU kernels for arithmetic, comparisons and Select. The scalar functions are in
// elementwise_ops.h, shared with FusedElementwise.
#include "kernels/cpu/elementwise_ops.h"
#include "kernels/register_all.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

template <class T>
void select_k(KernelContext& c) {
  const Tensor& cond = c.input(0);
  const Tensor& a = c.input(1);
  const Tensor& b = c.input(2);
  Tensor& out = c.output(0);
  const bool* pc = static_cast<const bool*>(raw_data(cond));
  const T* pa = static_cast<const T*>(raw_data(a));
  const T* pb = static_cast<const T*>(raw_data(b));
  T* po = static_cast<T*>(raw_data(out));
  BroadcastPlan<3> plan(out.shape(), {&cond.shape(), &a.shape(), &b.shape()});
  const int64_t len = plan.inner;
  const auto s = plan.inner_stride;
  c.pool().parallel_for(plan.outer, std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(len, 1)),
                        [&](int64_t begin, int64_t end) {
    plan.for_rows(begin, end, [&](int64_t o, const std::array<int64_t, 3>& off) {
      for (int64_t j = 0; j < len; ++j)
        po[o + j] = pc[off[0] + j * s[0]] ? pa[off[1] + j * s[1]] : pb[off[2] + j * s[2]];
    });
  });
}

}  // namespace

void register_math_kernels() {
  // Each on float16 and bfloat16 too, through its float32 kernel (register_elementwise).
  register_numeric<AddOp>("Add");
  register_numeric<SubOp>("Sub");
  register_numeric<MulOp>("Mul");
  register_numeric<DivOp>("Div");
  register_numeric<MaximumOp>("Maximum");
  register_numeric<MinimumOp>("Minimum");
  register_numeric<PowOp>("Pow");
  register_numeric<NegOp>("Neg");
  register_numeric<AbsOp>("Abs");
  register_numeric<SignOp>("Sign");
  register_numeric<SquareOp>("Square");
  register_float<ExpOp>("Exp");
  register_float<LogOp>("Log");
  register_float<ErfOp>("Erf");
  register_float<GeluOp>("Gelu");
  register_float<SqrtOp>("Sqrt");
  register_float<RsqrtOp>("Rsqrt");

  register_elementwise<EqualOp, float, double, int32_t, int64_t, bool>("Equal");
  register_elementwise<NotEqualOp, float, double, int32_t, int64_t, bool>("NotEqual");
  register_numeric<LessOp>("Less");
  register_numeric<LessEqualOp>("LessEqual");
  register_numeric<GreaterOp>("Greater");
  register_numeric<GreaterEqualOp>("GreaterEqual");

  register_kernel("Select", DeviceType::CPU, float32, select_k<float>);
  register_kernel("Select", DeviceType::CPU, float64, select_k<double>);
  register_kernel("Select", DeviceType::CPU, int32, select_k<int32_t>);
  register_kernel("Select", DeviceType::CPU, int64, select_k<int64_t>);
  register_kernel("Select", DeviceType::CPU, bool_, select_k<bool>);
  register_via_float32("Select");
}

}  // namespace weft::cpu
