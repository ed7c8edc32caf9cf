// Collectives between the members of a group of devices, as front-end functions over the ops of
// kernels/defs/collective.cpp. Called eagerly they wait for the other members (a group of one
// member completes at once); traced or in a Graph they become nodes run by an asynchronous kernel.
//
//   CollectiveGroup g{.key = 1, .members = {task0 + "/device:CPU:0", task1 + "/device:CPU:0"}};
//   {
//     DeviceScope on(g.members[t]);                          // member t's device
//     Tensor sum = collective::all_reduce(grad, g, t);       // instance 0 of 1
//   }
//
// Every member of a group runs the same collectives with the same instance keys; a group that
// runs several collectives per step (gradient buckets) numbers them 0..instances-1. Not
// differentiable.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft {

struct CollectiveGroup {
  int64_t key = 0;
  std::vector<std::string> members;  // full device names, in member order
  int64_t instances = 1;             // collective instances of the group per step
  // NCCL's unique id, hex (comm/nccl/nccl_id.h): the group runs through NCCL on its GPU members,
  // one per process. Empty: host collectives (MPI across processes). DataParallel sets it.
  std::string nccl_id;
};

namespace collective {

// The element-wise sum (or "mean") over members of each input; one collective for all inputs.
std::vector<Tensor> all_reduce(std::span<const Tensor> xs, const CollectiveGroup& group, int member,
                               int64_t instance = 0, const std::string& reduction = "sum",
                               const SourceLocation& loc = SourceLocation::current());
Tensor all_reduce(const Tensor& x, const CollectiveGroup& group, int member, int64_t instance = 0,
                  const std::string& reduction = "sum", const SourceLocation& loc = SourceLocation::current());
// The root member's `x` on every member: the root calls broadcast_send, the others broadcast_recv.
Tensor broadcast_send(const Tensor& x, const CollectiveGroup& group, int member, int64_t instance = 0,
                      const SourceLocation& loc = SourceLocation::current());
Tensor broadcast_recv(DType dtype, const Shape& shape, const CollectiveGroup& group, int member, int root,
                      int64_t instance = 0, const SourceLocation& loc = SourceLocation::current());
// The members' `x` concatenated along dim 0 in member order (dim 0 may differ between members).
Tensor all_gather(const Tensor& x, const CollectiveGroup& group, int member, int64_t instance = 0,
                  const SourceLocation& loc = SourceLocation::current());

}  // namespace collective
}  // namespace weft
