// What a collective kernel hands its inputs to: the interface, here beside Rendezvous, that
// comm/ implements (the process's collective executor: within a process, across tasks over MPI,
// and for GPU groups through NCCL). Kernels reach it through their run context
// (RunContext::collectives), as Send and Recv reach their rendezvous, so they know nothing of
// ranks, communicators or libraries. Also here: a collective's parameters as its kernel reads
// them from the node, and the format of a group's NCCL id (validated when a node is made).
#pragma once

#include <array>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tensor.h"

namespace weft {

class CancellationManager;

enum class CollectiveKind { kAllReduce, kBroadcast, kAllGather };
enum class CollectiveReduction { kSum, kMean };

// One member's view of a collective instance.
struct CollectiveParams {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::string op;                    // display name, for messages: "collective_all_reduce"
  int64_t group_key = 0;
  std::vector<std::string> members;  // full device names, in member order
  int member = 0;                    // this contribution's index in members
  int64_t instance_key = 0;
  int64_t group_instances = 1;
  CollectiveReduction reduction = CollectiveReduction::kSum;  // all-reduce
  int root = 0;                                               // broadcast: the member whose value all get
  DType dtype = DType::Float32;                               // broadcast, non-root members: what they get
  Shape shape;
  std::string nccl_id;  // hex NCCL unique id: run through NCCL on GPUs; empty: not
};

// "a,b,c" -> its names; InvalidArgument "[op] ..." for an empty list, an empty name or a repeat.
std::vector<std::string> parse_group_members(std::string_view joined, std::string_view op);
// The task a device name belongs to ("/job:worker/replica:0/task:1"); this process's for a short
// name. InvalidArgument "[op] ..." for a malformed name or one that names its task only partly.
std::string task_of_device(std::string_view device, std::string_view op);

// A collective of GPU tensors, for the device's library: `outputs` are allocated on the GPU, and
// `stream` is the kernel's compute stream (a cudaStream_t), which waits for the result.
struct DeviceCollectiveCall {
  CollectiveParams p;
  int64_t step_id = 0;
  CancellationManager* cancellation = nullptr;
  int device = 0;  // the CUDA ordinal
  void* stream = nullptr;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
};

class Collectives {
 public:
  using Done = std::function<void(std::exception_ptr error, std::vector<Tensor> outputs)>;
  virtual ~Collectives() = default;
  // Contributes `inputs` (host tensors) of member p.member to instance (p.group_key, step_id,
  // p.instance_key). `done` is called exactly once, on any thread (possibly this one, before
  // run_async returns): with the member's outputs, or with the error (InvalidArgument naming
  // p.op when members disagree; the step's error when `cancellation`, which may be null, is
  // cancelled first).
  virtual void run_async(const CollectiveParams& p, int64_t step_id, std::vector<Tensor> inputs,
                         CancellationManager* cancellation, Done done) = 0;
  // The same for GPU tensors, through the device's library (NCCL); `done` once, on any thread.
  virtual void run_on_device_async(DeviceCollectiveCall call, std::function<void(std::exception_ptr)> done) = 0;
};

// A group's NCCL unique id, as the "nccl_id" attribute spells it: 256 hex digits.
inline constexpr size_t kNcclIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
using NcclIdBytes = std::array<uint8_t, kNcclIdBytes>;
std::string encode_nccl_id(const NcclIdBytes& id);
// InvalidArgument "[op] ..." unless `hex` is exactly 256 hex digits.
NcclIdBytes decode_nccl_id(std::string_view hex, std::string_view op);
// Whether this build has NCCL (every CUDA build does).
bool nccl_compiled_in();
// The dtypes NCCL has a type for (comm/nccl/nccl_dtype.h maps them): every weft dtype but bool.
inline bool nccl_dtype_supported(DType dtype) { return dtype != DType::Bool; }

}  // namespace weft
