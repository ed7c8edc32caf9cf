// What a traced step knows about the data-parallel replica it is traced for, and the one place
// where the optimizer asks for it: Optimizer::apply_gradients hands its gradients to the current
// replica context, which returns them all-reduced over the replicas (api/distribute/
// gradient_buckets.h), so every replica applies the same update, as TensorFlow's
// MirroredStrategy does inside apply_gradients.
//
// Installed by DataParallel while it traces a step (ReplicaContextScope); null otherwise, and the
// optimizer then uses its gradients as they are.
#pragma once

#include <source_location>
#include <vector>

#include "api/variable.h"
#include "runtime/tensor.h"

namespace weft::distribute {

class ReplicaContext {
 public:
  virtual ~ReplicaContext() = default;
  // grads[i] belongs to vars[i]; undefined gradients stay undefined. Returns the gradients every
  // replica will apply.
  virtual std::vector<Tensor> all_reduce_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars,
                                                   const std::source_location& loc) = 0;
  // One all-reduce of `xs` over the replicas (a new instance of the step's group):
  // kSum adds them. kBatchWeightedMean averages them, each replica weighted by its share w_r of
  // the global batch (batch normalisation's moving statistics, so every replica keeps the same).
  // kGradientOfSum is the gradient of a kSum taken in a replica's trace: a replica's tape
  // differentiates its own loss, whose gradients all_reduce_gradients later scales by w_r, while
  // the step's loss is sum_r w_r loss_r; so replica r gets (sum_r' w_r' g_r') / w_r, which the
  // scaling turns into the global loss's gradient (it is the plain sum when shards are even).
  // kSum is differentiable through it (registered by register_replica_gradients below), which
  // SyncBatchNormalization needs.
  enum class Reduction { kSum, kBatchWeightedMean, kGradientOfSum };
  virtual std::vector<Tensor> all_reduce(const std::vector<Tensor>& xs, Reduction reduction,
                                         const std::source_location& loc) = 0;
};

// The context of the trace running on this thread, or null.
ReplicaContext* current_replica_context();

// The gradient of CollectiveAllReduce (sum): an all-reduce of the output gradients in the same
// replica context. Outside a data-parallel step there is no group to make it in: Unimplemented.
void register_replica_gradients();

class ReplicaContextScope {
 public:
  explicit ReplicaContextScope(ReplicaContext* context);
  ~ReplicaContextScope();
  ReplicaContextScope(const ReplicaContextScope&) = delete;
  ReplicaContextScope& operator=(const ReplicaContextScope&) = delete;

 private:
  ReplicaContext* saved_;
};

}  // namespace weft::distribute
