#include "api/distribute/replica_context.h"

namespace weft::distribute {

namespace {
thread_local ReplicaContext* t_context = nullptr;
}  // namespace

ReplicaContext* current_replica_context() { return t_context; }

ReplicaContextScope::ReplicaContextScope(ReplicaContext* context) : saved_(t_context) { t_context = context; }
ReplicaContextScope::~ReplicaContextScope() { t_context = saved_; }

}  // namespace weft::distribute
