// Device-side scalar helpers shared by the CUDA elementwise kernels: the float/double math
// functions by type, and (from kernels/shared_elementwise_ops.h) the integer wrap-around rule of
// the CPU kernels, so a GPU kernel gives the CPU kernel's answer bit for bit wherever the math is
// exact.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/shared_elementwise_ops.h"  // Wide: the integer wrap-around rule

namespace weft::cuda {

template <class T>
__device__ __forceinline__ T dev_exp(T x) {
  if constexpr (std::is_same_v<T, float>) return expf(x);
  else return exp(x);
}
template <class T>
__device__ __forceinline__ T dev_log(T x) {
  if constexpr (std::is_same_v<T, float>) return logf(x);
  else return log(x);
}
template <class T>
__device__ __forceinline__ T dev_erf(T x) {
  if constexpr (std::is_same_v<T, float>) return erff(x);
  else return erf(x);
}
template <class T>
__device__ __forceinline__ T dev_sqrt(T x) {
  if constexpr (std::is_same_v<T, float>) return sqrtf(x);  // correctly rounded (-prec-sqrt=true)
  else return sqrt(x);
}
template <class T>
__device__ __forceinline__ T dev_tanh(T x) {
  if constexpr (std::is_same_v<T, float>) return tanhf(x);
  else return tanh(x);
}
template <class T>
__device__ __forceinline__ T dev_fabs(T x) {
  if constexpr (std::is_same_v<T, float>) return fabsf(x);
  else return fabs(x);
}
template <class T>
__device__ __forceinline__ T dev_pow(T a, T b) {
  if constexpr (std::is_same_v<T, float>) return powf(a, b);
  else return pow(a, b);
}

// Codes the checked integer kernels store in CudaContext::error_word.
inline constexpr int32_t kErrorDivisionByZero = 1;
inline constexpr int32_t kErrorNegativePower = 2;
inline constexpr int32_t kErrorLabelOutOfRange = 3;  // softmax.cu: a class label outside [0, classes)

__device__ __forceinline__ void report_error(int32_t* word, int32_t code) { atomicExch(word, code); }

}  // namespace weft::cuda

namespace weft::cuda {

// The CPU's sigmoid (kernels/cpu/math.cpp): exp only of a non-positive number, so no inf / inf.
template <class T>
__device__ __forceinline__ T dev_sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + dev_exp(-x));
  const T e = dev_exp(x);
  return e / (T(1) + e);
}

}  // namespace weft::cuda
