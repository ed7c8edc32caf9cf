// A test-only op, TestSleep: sleeps as many milliseconds as the first element of its float32 input
// says, then passes that value on (a negative time is an error: a kernel that fails). A kernel stuck for a while on whichever task runs it, for the
// stall tests. Register it in every task (before cluster::init, so the op registries agree).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "api/dispatch.h"
#include "api/weft/weft.h"
#include "kernels/register_all.h"
#include "runtime/error.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"

namespace weft::testing {

// How many TestSleep kernels have started in this process.
inline std::atomic<int>& test_sleep_starts() {
  static std::atomic<int> starts{0};
  return starts;
}

// Once per process; later calls do nothing.
inline void register_test_sleep() {
  static const bool registered = [] {
    register_builtin_ops();
    op_registry().add({.name = "TestSleep", .display = "test_sleep", .min_inputs = 1, .max_inputs = 1,
                       .infer = [](InferContext& c) { c.set_output(0, c.input_dtype(0), c.input_shape(0)); }});
    register_kernel("TestSleep", DeviceType::CPU, float32, [](KernelContext& ctx) {
      const Tensor& in = ctx.input(0);
      const float ms = in.data<float>()[0];
      if (ms < 0) throw InvalidArgument("TestSleep: a negative time, " + std::to_string(ms) + " ms");
      ++test_sleep_starts();
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(ms)));
      std::copy(in.data<float>(), in.data<float>() + in.size(), ctx.output(0).data<float>());
    });
    return true;
  }();
  (void)registered;
}

inline Tensor test_sleep(const Tensor& ms, const SourceLocation& loc = SourceLocation::current()) {
  return dispatch1(op_def("TestSleep"), {ms}, {}, loc);
}

// The step the stall, flight-record and stuck-kernel tests make wait, built in the caller's
// GraphScope: `sleeper` (a device or task name) sleeps as long as `ms` says, and `doubler` doubles
// what it gives, so while the kernel sleeps `doubler` waits in a Recv for it, and the chief in a
// Recv for `doubler`'s. The TestSleep node is created at the caller's file:line.
inline Tensor sleep_then_double(const Tensor& ms, const std::string& sleeper, const std::string& doubler,
                                const SourceLocation& loc = SourceLocation::current()) {
  Tensor slept;
  {
    DeviceScope on(sleeper);
    slept = test_sleep(ms, loc);
  }
  DeviceScope on(doubler);
  return slept * 2.f;
}

}  // namespace weft::testing
