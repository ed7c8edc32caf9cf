#include "runtime/device_transfer.h"

#include <utility>

#include "runtime/error.h"
#include "runtime/tensor_internals.h"

namespace weft {

bool readable_on(const Device* dev, const Tensor& t) {
  const Device* where = t.device_ptr();
  return where == dev || (where->type() == DeviceType::CPU && dev->type() == DeviceType::CPU);
}

void Device::copy_to_host_async(const void* src, void* dst, size_t bytes, std::function<void(std::exception_ptr)> done) {
  std::exception_ptr error;
  try {
    copy_to_host(src, dst, bytes);
  } catch (...) {
    error = std::current_exception();
  }
  done(error);
}

void Device::copy_to_peer(const void*, Device& to, void*, size_t, std::function<void()> read) {
  read();
  throw FailedPrecondition("[transfer] " + name() + " cannot copy to " + to.name() + " without the host");
}

namespace {

// Device memory to host memory of `to` (a CPU device): `then` gets the host tensor.
void download_async(Tensor value, Device& to, TransferDone then) {
  Tensor host = Tensor::empty(value.dtype(), value.shape(), &to);
  Device* from = value.device_ptr();
  const void* src = raw_data(value);
  void* dst = raw_data(host);
  const size_t bytes = value.nbytes();
  // The callback holds both tensors: their buffers must outlive the copy.
  from->copy_to_host_async(src, dst, bytes,
                           [value = std::move(value), host, then = std::move(then)](std::exception_ptr error) {
                             then(error, error ? Tensor() : host);
                           });
}

Tensor upload(const Tensor& host, Device& to) {
  Tensor out = Tensor::empty(host.dtype(), host.shape(), &to);
  if (out.nbytes()) to.copy_from_host(raw_data(host), raw_data(out), out.nbytes());
  return out;
}

}  // namespace

void transfer_async(Tensor value, Device& to, TransferDone done) {
  if (readable_on(&to, value)) {
    done(nullptr, std::move(value));
    return;
  }
  Tensor result;
  std::exception_ptr error;
  try {
    if (value.device_ptr()->type() == DeviceType::CPU) {
      result = upload(value, to);
    } else if (to.type() == DeviceType::CPU) {
      download_async(std::move(value), to, std::move(done));
      return;
    } else if (value.device_ptr()->can_copy_to_peer(to)) {
      // GPU to GPU directly: queued on `to`, which may use the result at once; the copy holds
      // `value` until it has read it.
      result = value.to(&to);
    } else {
      // GPU to GPU through the host when the two have no peer path: down on the source's copy
      // thread, then up.
      download_async(std::move(value), *cpu_device(), [&to, done = std::move(done)](std::exception_ptr e, Tensor host) {
        Tensor out;
        if (!e) {
          try {
            out = upload(host, to);
          } catch (...) {
            e = std::current_exception();
          }
        }
        done(e, e ? Tensor() : std::move(out));
      });
      return;
    }
  } catch (...) {
    error = std::current_exception();
  }
  done(error, error ? Tensor() : std::move(result));
}

}  // namespace weft
