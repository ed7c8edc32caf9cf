// Moving tensors between the devices of this process: what a Recv does when the tensor it
// receives lives where its kernel cannot read it, and what eager dispatch does with inputs on
// another device.
//
//   transfer_async(value, *gpu, [](std::exception_ptr error, Tensor on_gpu) { ... });
//
// Host memory is shared by every CPU device (the logical ones too), so between CPUs a tensor is
// handed over as is: an optimizer's in-place update must reach the variable's own buffer. Into a
// GPU the copy is queued on its copy stream and the tensor is usable at once (the GPU's kernels
// wait for the copy); out of a GPU the callback runs when the bytes have arrived, on the GPU's
// copy thread, and no thread waits meanwhile.
#pragma once

#include <exception>
#include <functional>

#include "runtime/device.h"
#include "runtime/tensor.h"

namespace weft {

// Whether a kernel on `dev` reads `t` where it is: on its own device, or in host memory, which
// every CPU device shares.
bool readable_on(const Device* dev, const Tensor& t);

using TransferDone = std::function<void(std::exception_ptr error, Tensor value)>;
// Calls done(null, t) with `value` itself when readable_on(&to, value), else with a copy on `to`;
// done(error, {}) when a copy fails. Exactly once; inline unless the copy leaves a GPU.
void transfer_async(Tensor value, Device& to, TransferDone done);

}  // namespace weft
