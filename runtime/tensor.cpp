#include "runtime/tensor.h"

#include "runtime/pending_value.h"
#include "runtime/tensor_internals.h"

namespace weft {

Buffer::Buffer(Device* device, size_t bytes)
    : device_(device), allocator_(&device->allocator()), data_(allocator_->allocate(bytes)), bytes_(bytes) {}

Buffer::~Buffer() { allocator_->deallocate(data_, bytes_); }

TensorImpl::TensorImpl(DType d, Shape s, IntrusivePtr<Buffer> b, Device* dev)
    : dtype(d), shape(std::move(s)), buffer(std::move(b)), device(dev) {}
TensorImpl::TensorImpl(DType d, Shape s, std::unique_ptr<SymbolicRef> sym)
    : dtype(d), shape(std::move(s)), device(nullptr), symbolic(std::move(sym)) {}

TensorImpl::~TensorImpl() {
  if (pending.load(std::memory_order_relaxed)) destroy_pending();
}

void* Tensor::writable_data() const { return concrete_buffer(Access::kWrite)->data(); }

Tensor Tensor::empty(DType dtype, Shape shape, Device* device) {
  if (!device) device = cpu_device();
  int64_t n = shape.num_elements();
  if (n < 0) throw InvalidArgument("[empty] cannot allocate a tensor of partially unknown shape " + shape.to_string());
  // A byte count that wrapped around would allocate a small block for a huge tensor.
  size_t bytes;
  if (__builtin_mul_overflow(static_cast<size_t>(n), dtype_size(dtype), &bytes))
    throw InvalidArgument("[empty] a " + std::string(dtype_name(dtype)) + " tensor of shape " + shape.to_string() +
                          " needs more bytes than a size_t can count");
  auto buffer = make_intrusive<Buffer>(device, bytes);
  return Tensor(make_intrusive<TensorImpl>(dtype, std::move(shape), std::move(buffer), device));
}

Tensor Tensor::from_host(DType dtype, Shape shape, const void* bytes, Device* device) {
  Tensor t = empty(dtype, std::move(shape), device);
  if (t.nbytes()) t.device_ptr()->copy_from_host(bytes, raw_data(t), t.nbytes());
  return t;
}

Tensor Tensor::symbolic(DType dtype, Shape shape, std::unique_ptr<SymbolicRef> ref) {
  return Tensor(make_intrusive<TensorImpl>(dtype, std::move(shape), std::move(ref)));
}

std::string Tensor::device() const {
  const TensorImpl* i = checked_impl();
  return i->device ? i->device->name() : std::string();
}

std::string Tensor::name() const {
  const TensorImpl* i = checked_impl();
  if (!i->symbolic) return "";
  return i->symbolic->node_name + ":" + std::to_string(i->symbolic->output);
}

void Tensor::throw_null() {
  throw InvalidArgument("[tensor] use of an empty Tensor handle (default-constructed or moved from)");
}

void Tensor::check_element_type(DType requested, const char* what) const {
  if (requested != dtype())
    throw InvalidArgument(std::string("[") + what + "] requested element type " +
                          std::string(dtype_name(requested)) + " from a tensor of dtype " +
                          std::string(dtype_name(dtype())));
}

// Symbolic tensors have no buffer to give.
Buffer* Tensor::concrete_buffer(Access access) const {
  const TensorImpl* i = checked_impl();
  if (!i->buffer)
    throw FailedPrecondition("[tensor] " + name() +
                             " is symbolic: it has no value until its graph runs (use print() or a Session)");
  if (any_pending()) [[unlikely]] {
    if (access == Access::kRead) compute_pending(*i);
    else settle_for_raw_access(*i);
  }
  return i->buffer.get();
}

Tensor Tensor::view(Shape new_shape) const {
  const TensorImpl* i = checked_impl();
  if (new_shape.num_elements() != i->shape.num_elements())
    throw InvalidArgument("[view] cannot view shape " + i->shape.to_string() + " as " + new_shape.to_string());
  concrete_buffer(Access::kRead);  // a write through the view settles what it must then
  return Tensor(make_intrusive<TensorImpl>(i->dtype, std::move(new_shape), i->buffer, i->device));
}

Tensor Tensor::to(Device* device) const {
  if (device_ptr() == device) return *this;
  Tensor out = empty(dtype(), shape(), device);
  if (nbytes() == 0) return out;
  const void* src = concrete_buffer(Access::kRead)->data();
  if (device_ptr()->type() == DeviceType::CPU) {
    device->copy_from_host(src, raw_data(out), nbytes());
  } else if (device->type() == DeviceType::CPU) {
    device_ptr()->copy_to_host(src, raw_data(out), nbytes());
  } else if (device_ptr()->can_copy_to_peer(*device)) {
    device_ptr()->copy_to_peer(src, *device, raw_data(out), nbytes(), [source = *this] {});  // held until read
  } else {
    std::vector<unsigned char> staging(nbytes());
    device_ptr()->copy_to_host(src, staging.data(), nbytes());
    device->copy_from_host(staging.data(), raw_data(out), nbytes());
  }
  return out;
}

void Tensor::copy_to_host(void* dst) const {
  Buffer* b = concrete_buffer(Access::kRead);
  if (nbytes()) checked_impl()->device->copy_to_host(b->data(), dst, nbytes());
}

}  // namespace weft
