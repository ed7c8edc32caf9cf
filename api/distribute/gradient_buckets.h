// Gradient buckets, as PyTorch's DistributedDataParallel makes them: a data-parallel step's
// gradients are packed into buckets, and each bucket is one CollectiveAllReduce node, which the
// executor starts as soon as that bucket's gradients exist, while the rest of the backward pass
// goes on. Gradients are taken in reverse order of their variables (backward makes the last
// layer's first), a bucket holds one dtype, the first bucket is small so that communication
// starts early, and the others hold up to `bucket_bytes`.
//
// The all-reduce sums each replica's gradient scaled by its share of the global batch
// (replica_weight = rows of this replica / rows of the step): for a loss that is a mean over
// the batch, the sum is exactly the gradient of the global batch's loss, even when the replicas'
// shards differ in size (an uneven last batch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/distribute/replica_context.h"
#include "api/ops/collective.h"

namespace weft::distribute {

struct BucketOptions {
  int64_t bucket_bytes = 25ll << 20;
  int64_t first_bucket_bytes = 1ll << 20;
};

// Indices into `grads` (undefined ones left out), one list per bucket, in the order the buckets
// are made: reverse order of the gradients; a bucket closes when the next gradient of its dtype
// would take it past its cap (a gradient larger than the cap gets a bucket of its own).
std::vector<std::vector<size_t>> plan_gradient_buckets(const std::vector<Tensor>& grads, const BucketOptions& options);

inline constexpr const char* kReplicaWeightArg = "replica_weight";
// Traced instance counts are placeholders until replication counts the nodes.
inline constexpr int64_t kInstancesUnknown = 1 << 30;

// The trace is replica 0's: its all-reduce nodes are member 0, and the group's instance count
// (group.instances, kInstancesUnknown while tracing) and each replica's member index are set when
// the trace is replicated (api/distribute/replicate.h).
class GradientAllReducer final : public ReplicaContext {
 public:
  GradientAllReducer(Tensor replica_weight, CollectiveGroup group, BucketOptions options)
      : weight_(std::move(replica_weight)), group_(std::move(group)), options_(options) {}
  std::vector<Tensor> all_reduce_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars,
                                           const std::source_location& loc) override;
  std::vector<Tensor> all_reduce(const std::vector<Tensor>& xs, Reduction reduction,
                                 const std::source_location& loc) override;
  int64_t instances() const { return next_instance_; }

 private:
  Tensor weight_;  // float32 scalar placeholder of the trace
  CollectiveGroup group_;
  BucketOptions options_;
  int64_t next_instance_ = 0;
};

}  // namespace weft::distribute
