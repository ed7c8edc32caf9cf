// Moving tensors between devices of this process, on the CPU (tests/gpu/transfer_test.cpp covers
// the GPU): host memory is shared, so a tensor is handed over, never copied.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/device_transfer.h"
#include "runtime/error.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

TEST(DeviceTransfer, HostTensorsAreHandedOverInline) {
  const std::vector<float> v = {1, 2, 3};
  Tensor t = Tensor::from_host(float32, Shape{3}, v.data());
  EXPECT_TRUE(readable_on(cpu_device(), t));
  bool called = false;
  transfer_async(t, *cpu_device(), [&](std::exception_ptr e, Tensor got) {
    called = true;
    EXPECT_FALSE(e);
    EXPECT_EQ(raw_data(got), raw_data(t));  // the same buffer
  });
  EXPECT_TRUE(called) << "a hand-over completes inline";
}

TEST(DeviceTransfer, DefaultAsyncCopyToHostCopiesThenCallsBack) {
  const std::vector<int32_t> src = {5, -6, 7, 8};
  std::vector<int32_t> dst(4, 0);
  int calls = 0;
  cpu_device()->copy_to_host_async(src.data(), dst.data(), sizeof(int32_t) * 4, [&](std::exception_ptr e) {
    ++calls;
    EXPECT_FALSE(e);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(dst, src);
}

// Peer copies are for devices with memories of their own: a CPU never offers one, and asking it
// for one anyway is an error naming both devices, not a silent no-op.
TEST(DeviceTransfer, CpusHaveNoPeerCopy) {
  Device& cpu = *cpu_device();
  EXPECT_FALSE(cpu.can_copy_to_peer(cpu));
  int32_t a = 1, b = 2;
  int reads = 0;
  try {
    cpu.copy_to_peer(&a, cpu, &b, sizeof a, [&] { ++reads; });
    FAIL() << "expected FailedPrecondition";
  } catch (const FailedPrecondition& e) {
    EXPECT_NE(std::string(e.what()).find(cpu.name() + " cannot copy to " + cpu.name()), std::string::npos) << e.what();
  }
  EXPECT_EQ(b, 2);
  EXPECT_EQ(reads, 1) << "the source is released also when the copy is refused";
}

}  // namespace
}  // namespace weft
