// The promise "every op runs on CUDA", held: an op that gains a CPU kernel for a dtype
// without its CUDA twin fails here, instead of silently falling back to the CPU by soft placement
// on every GPU machine. Runs without a GPU: CUDA kernels are registered wherever CUDA is compiled in.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernels/register_all.h"
#include "runtime/device.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"

namespace weft {
namespace {

// Ops whose work is the host's by nature: printing to the process's stdout, and reading batches
// from files (their outputs reach a GPU through the ordinary host-to-device copy).
const std::set<std::string> kHostOnlyOps = {"Print", "ReadShardedBatch"};

TEST(CudaCoverage, EveryCpuKernelHasACudaTwin) {
  if (!cuda_compiled_in()) GTEST_SKIP() << "built without CUDA";
  register_builtin_ops();
  std::string missing;
  int checked = 0;
  for (const OpDef* op : op_registry().all()) {
    if (kHostOnlyOps.count(op->name)) continue;
    for (int d = 0; d < kNumDTypes; ++d) {
      const DType t = static_cast<DType>(d);
      if (!has_kernel(*op, DeviceType::CPU, t)) continue;
      ++checked;
      if (!has_kernel(*op, DeviceType::CUDA, t)) missing += " " + op->name + "/" + std::string(dtype_name(t));
    }
  }
  EXPECT_EQ(missing, "") << "CPU kernels without a CUDA kernel:" << missing;
  EXPECT_GT(checked, 300) << "the registry looks empty";
}

TEST(CudaCoverage, HostOnlyOpsAreRealOps) {
  register_builtin_ops();
  for (const std::string& name : kHostOnlyOps) EXPECT_NE(op_registry().find(name), nullptr) << name;
}

}  // namespace
}  // namespace weft
