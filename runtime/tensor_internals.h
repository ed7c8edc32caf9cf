// The kernel-facing view of a Tensor: its state and its memory, for kernels, the executor, the
// dispatcher and the transports. Users see only Tensor's public members (and data<T>()); this
// header is not part of what <weft/weft.h> includes.
//
//   float* p = static_cast<float*>(raw_data(out));   // any dtype, the kernel knows the layout
//   TensorImpl* impl = tensor_impl(t);               // throws on an empty handle
#pragma once

#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/tensor.h"
#include "runtime/tensor_lending.h"

namespace weft {

class TensorInternals {
 public:
  static TensorImpl* impl(const Tensor& t) { return t.checked_impl(); }
  static TensorImpl* impl_or_null(const Tensor& t) { return t.impl_.get(); }
  // Untyped element memory; see Tensor::data for when pending values are computed first.
  static void* raw_data(const Tensor& t) { return t.concrete_buffer(Tensor::Access::kWrite)->data(); }
};

inline TensorImpl* tensor_impl(const Tensor& t) { return TensorInternals::impl(t); }
// Null for an empty handle, where tensor_impl throws.
inline TensorImpl* tensor_impl_or_null(const Tensor& t) { return TensorInternals::impl_or_null(t); }
inline void* raw_data(const Tensor& t) { return TensorInternals::raw_data(t); }
// See runtime/tensor_lending.h.
inline Tensor borrowed(const Tensor& t) { return TensorLending::lend(t); }
inline void forget_borrowed(Tensor& lent) { TensorLending::forget(lent); }

}  // namespace weft
