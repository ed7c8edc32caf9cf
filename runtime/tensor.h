// Tensor: a cheap, reference-counted handle to an n-dimensional array.
//
//   Tensor t = Tensor::empty(float32, {2, 3});      // uninitialised, on the CPU
//   float* p = t.data<float>();
//   std::vector<float> v = t.to_vector<float>();    // copies to host, row-major
//
// A tensor is either concrete (dtype, shape, device, buffer) or symbolic (an output of a graph
// node, shape possibly with unknown dims). Ops never look at which; the dispatcher does.
// Concrete tensors are dense and row-major; reshaping shares the buffer.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/intrusive_ptr.h"
#include "runtime/shape.h"
#include "runtime/symbolic.h"

namespace weft {

class Buffer;
class Device;
class PendingValue;

// The state behind a Tensor handle. Its constructors and destructor are out of line so that this
// header need not define Buffer or Device (the public header stays free of allocators and pools);
// its fields are here so that Tensor::dtype() and shape() stay inline loads on kernels' hot paths.
// Code that reaches it goes through runtime/tensor_internals.h.
class TensorImpl final : public RefCounted {
 public:
  TensorImpl(DType d, Shape s, IntrusivePtr<Buffer> b, Device* dev);
  TensorImpl(DType d, Shape s, std::unique_ptr<SymbolicRef> sym);
  ~TensorImpl();

  DType dtype;
  Shape shape;
  IntrusivePtr<Buffer> buffer;            // null for symbolic tensors
  Device* device;                         // not owned; null for symbolic tensors
  std::unique_ptr<SymbolicRef> symbolic;  // set for symbolic tensors
  // Set (owned) while the buffer's contents are still to be computed, and kept once they are
  // (runtime/pending_value.h). Null for nearly every tensor.
  std::atomic<PendingValue*> pending{nullptr};
  // True unless the tensor has a pending value not yet computed.
  bool pending_done() const;

 private:
  void destroy_pending();
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // An uninitialised concrete tensor on `device` (the CPU when null).
  static Tensor empty(DType dtype, Shape shape, Device* device = nullptr);
  // A concrete tensor holding a copy of `bytes` (host memory) on `device`.
  static Tensor from_host(DType dtype, Shape shape, const void* bytes, Device* device = nullptr);
  static Tensor symbolic(DType dtype, Shape shape, std::unique_ptr<SymbolicRef> ref);

  bool defined() const { return static_cast<bool>(impl_); }
  DType dtype() const { return checked_impl()->dtype; }
  const Shape& shape() const { return checked_impl()->shape; }
  int64_t rank() const { return checked_impl()->shape.rank(); }
  // Number of elements; -1 when the shape has unknown dims.
  int64_t size() const { return checked_impl()->shape.num_elements(); }
  size_t nbytes() const { return static_cast<size_t>(size()) * dtype_size(dtype()); }
  // Full device name, "" for a symbolic tensor.
  std::string device() const;
  Device* device_ptr() const { return checked_impl()->device; }
  bool is_symbolic() const { return checked_impl()->symbolic != nullptr; }
  const SymbolicRef* symbolic_ref() const { return checked_impl()->symbolic.get(); }
  // "MatMul_1:0" for graph tensors, "" for eager ones.
  std::string name() const;

  // Element access; only for concrete tensors whose memory the host can read (CPU). The pointer
  // may be written through, so pending values (runtime/pending_value.h) that could read this
  // memory are computed first. Kernels take the untyped pointer with raw_data(t)
  // (runtime/tensor_internals.h).
  template <class T>
  T* data() const {
    check_element_type(dtype_v<T>, "data");
    return static_cast<T*>(writable_data());
  }

  // Copies the elements to host memory, row-major. T must be the tensor's element type.
  template <class T>
  std::vector<T> to_vector() const {
    check_element_type(dtype_v<T>, "to_vector");
    if constexpr (std::is_same_v<T, bool>) {
      // std::vector<bool> is packed and has no data(): stage the bytes.
      std::vector<uint8_t> bytes(static_cast<size_t>(size()));
      if (!bytes.empty()) copy_to_host(bytes.data());
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      std::vector<T> out(static_cast<size_t>(size()));
      if (!out.empty()) copy_to_host(out.data());
      return out;
    }
  }
  // The single element of a one-element tensor.
  template <class T>
  T item() const {
    check_element_type(dtype_v<T>, "item");
    if (size() != 1)
      throw InvalidArgument("[item] tensor of shape " + shape().to_string() + " has " +
                            std::to_string(size()) + " elements, not one");
    T v;
    copy_to_host(&v);
    return v;
  }

  // Same buffer, another shape with the same number of elements.
  Tensor view(Shape shape) const;
  // A copy on `device` (the same tensor when it already lives there).
  Tensor to(Device* device) const;
  void copy_to_host(void* dst) const;

  // Whether both handles are the same tensor (not merely equal values).
  bool same_as(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  // The kernel-facing view (runtime/tensor_internals.h) and the lending of handles
  // (runtime/tensor_lending.h) reach the state; users do not.
  friend class TensorInternals;
  friend class TensorLending;

  TensorImpl* checked_impl() const {
    if (!impl_) throw_null();
    return impl_.get();
  }
  void* writable_data() const;
  [[noreturn]] static void throw_null();
  void check_element_type(DType requested, const char* what) const;
  // kRead: the caller only reads the memory (its own pending value is computed); kWrite: it may
  // write it (every pending value that may read it is computed too).
  enum class Access { kRead, kWrite };
  Buffer* concrete_buffer(Access access) const;

  IntrusivePtr<TensorImpl> impl_;
};

// eager:    Tensor([2 3 4], shape=(3,), dtype=float32)
// symbolic: Tensor("add:0", shape=(3,), dtype=float32)
std::ostream& operator<<(std::ostream& os, const Tensor& t);
// The bracketed values alone, numpy-style, summarised with "..." beyond 1000 elements;
// continuation lines are indented by `indent` extra columns.
std::string format_values(const Tensor& t, int indent = 0);

}  // namespace weft
