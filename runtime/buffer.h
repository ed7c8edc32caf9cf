// The memory behind a concrete tensor: a reference-counted block from a device's allocator.
// Several tensors (a tensor and its reshaped views) may share one Buffer.
#pragma once

#include <cstddef>

#include "runtime/allocator.h"
#include "runtime/intrusive_ptr.h"

namespace weft {

class Device;

class Buffer final : public RefCounted {
 public:
  // Allocates `bytes` on `device` (uninitialised).
  Buffer(Device* device, size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device* device() const { return device_; }  // not owned

 private:
  Device* device_;
  Allocator* allocator_;  // not owned
  void* data_;
  size_t bytes_;
};

using BufferPtr = IntrusivePtr<Buffer>;

}  // namespace weft
