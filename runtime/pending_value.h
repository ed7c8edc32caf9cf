// Pending values: a concrete tensor whose elements are computed when they are first read.
//
// Eager elementwise ops on a GPU are deferred this way (api/eager_fusion.h): relu(a + b) makes
// one pending tensor whose program is both ops, and the first read of it (a kernel taking it as
// an input, a copy to the host, data()) runs the program as one FusedElementwise launch. The
// tensor is otherwise an ordinary concrete tensor: its dtype, shape, device and buffer exist from
// the start (the buffer is allocated when the op is dispatched, as an eager op's output would be),
// so only the moment its contents are written moves.
//
//   attach_pending(*tensor_impl(t), std::make_unique<MyValue>(...));   // t's buffer is written later
//   raw_data(t);                                                 // runs MyValue::compute once
//
// Rules that keep deferral invisible:
// - A pending value holds its inputs, and ops never write memory that another handle holds (they
//   copy on write), so it reads what the op would have read when it was dispatched.
// - Every kernel's inputs are computed before it runs (run_kernel and the executor call
//   compute_pending_inputs), so kernels never find a pending input, on any thread.
// - Raw access to a tensor's memory that may write it (raw_data(), data<T>()) first computes every
//   pending value of the process when anything else holds that memory: a program writing through
//   data() into an input of a pending value (refilling a reused batch buffer, say) must not
//   change what the value reads. A tensor just made and held once (a scalar operand being
//   filled) settles nothing; reads (to_vector, copies, views) compute only their own tensor.
// - An error while computing is kept and raised at every read of the tensor.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <vector>
#include "runtime/tensor_internals.h"

namespace weft {

class Tensor;
class TensorImpl;

class PendingValue {
 public:
  virtual ~PendingValue() = default;
  // Writes the value into `out`, a handle sharing the pending tensor's buffer.
  virtual void compute(const Tensor& out) = 0;
  // Lets go of every tensor the value holds for its computation; called once, after it has run,
  // with no lock of this machinery held (an input's release may free much memory).
  virtual void release_inputs() = 0;

  // Whether it has run (successfully or not).
  bool computed() const { return done_.load(std::memory_order_acquire); }

 private:
  friend void compute_pending(const TensorImpl&);
  friend bool settle_pending(PendingValue&, const TensorImpl&);
  std::mutex mu_;
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
};

// Makes `impl` (a concrete tensor with its buffer, not yet shared with anyone) pending on `value`.
void attach_pending(TensorImpl& impl, std::unique_ptr<PendingValue> value);

// Computes `impl`'s pending value if it has one not yet computed; rethrows its error if computing
// failed. Blocks while another thread computes it.
void compute_pending(const TensorImpl& impl);

// How many pending values are not yet computed (nor dropped); the cheap test before the calls
// below. Acquire: a thread handed a pending tensor sees the count that counts it.
extern std::atomic<int64_t> g_pending_values;
inline bool any_pending() { return g_pending_values.load(std::memory_order_acquire) != 0; }

// Computes every pending value of the process that anything still holds (the others are dropped
// unread), and waits for `inputs`' own. Run before every kernel (run_kernel, the executor's
// asynchronous kernels): the kernel may write memory a pending value reads, and must not find a
// pending input.
void settle_before_kernel(std::span<const Tensor> inputs);
inline void settle_before_kernel_if_any(std::span<const Tensor> inputs) {
  if (any_pending()) [[unlikely]] settle_before_kernel(inputs);
}

// Raw access that may write a tensor's memory, from the program (not from a kernel, nor a pool
// worker running one): computes `impl` if pending, then, unless `impl` is the only holder of its
// memory, every pending value, as before a kernel.
void settle_for_raw_access(const TensorImpl& impl);

// How many kernels this thread is running (nested: a kernel may run another through run_kernel).
// Inline, with KernelRunning below, because every kernel run on every path counts itself here.
inline thread_local int t_kernels_running = 0;

// Marks this thread as running a kernel for its lifetime: raw accesses inside it settle nothing
// (settle_before_kernel ran before it).
class KernelRunning {
 public:
  KernelRunning() { ++t_kernels_running; }
  ~KernelRunning() { --t_kernels_running; }
  KernelRunning(const KernelRunning&) = delete;
  KernelRunning& operator=(const KernelRunning&) = delete;
};

}  // namespace weft
