// CPU kernels of Sin and Cos: libm's, one call per element (glibc's sin and cos are correctly
// rounded in practice, within one ulp by their documentation).
#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/register_all.h"

namespace weft::cpu {

namespace {

template <class T>
void sin_k(KernelContext& c) {
  unary_loop<T, T>(c, [](T x) { return std::sin(x); }, kExpensiveGrain);
}
template <class T>
void cos_k(KernelContext& c) {
  unary_loop<T, T>(c, [](T x) { return std::cos(x); }, kExpensiveGrain);
}

}  // namespace

void register_trig_kernels() {
  register_kernel("Sin", DeviceType::CPU, float32, sin_k<float>);
  register_kernel("Sin", DeviceType::CPU, float64, sin_k<double>);
  register_kernel("Cos", DeviceType::CPU, float32, cos_k<float>);
  register_kernel("Cos", DeviceType::CPU, float64, cos_k<double>);
  register_via_float32({"Sin", "Cos"});
}

}  // namespace weft::cpu
