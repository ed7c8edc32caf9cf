#include "api/distribute/replica_context.h"

#include <string>

#include "api/gradient_registry.h"
#include "runtime/error.h"

namespace weft::distribute {

namespace {
thread_local ReplicaContext* t_context = nullptr;
}  // namespace

ReplicaContext* current_replica_context() { return t_context; }

ReplicaContextScope::ReplicaContextScope(ReplicaContext* context) : saved_(t_context) { t_context = context; }
ReplicaContextScope::~ReplicaContextScope() { t_context = saved_; }

namespace {

std::vector<Tensor> all_reduce_grad(const GradContext& g) {
  const std::string reduction = g.attrs.get_or<std::string>("reduction", "sum");
  if (reduction != "sum")
    throw Unimplemented("[collective_all_reduce] only a sum over replicas is differentiable, not a '" + reduction + "'");
  ReplicaContext* replicas = current_replica_context();
  if (!replicas)
    throw Unimplemented("[collective_all_reduce] its gradient is taken inside a data-parallel step only (the step's "
                        "replica context makes the gradient's all-reduce)");
  std::vector<Tensor> grads(g.output_grads.begin(), g.output_grads.end());
  return replicas->all_reduce(grads, ReplicaContext::Reduction::kGradientOfSum, std::source_location::current());
}

}  // namespace

void register_replica_gradients() { register_gradient("CollectiveAllReduce", all_reduce_grad); }

}  // namespace weft::distribute
