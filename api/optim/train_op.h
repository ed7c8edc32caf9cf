// The train op of TF1-style training (internal to api/optim): what Optimizer::apply_gradients and
// LossScaleOptimizer::apply_gradients return inside a GraphScope.
#pragma once

#include <cstddef>

#include "api/dispatch.h"
#include "api/graph.h"
#include "api/graph_builder.h"

namespace weft::optim::detail {

// The side effects `b` recorded from index `first_effect` on (the updates), grouped under a NoOp
// named "train" that a Session runs as a target. A traced function runs its updates with every
// call, and a cond branch or loop body with its node, so only a TF1 graph gets one: anywhere else
// (no builder, a traced function, a nested body) the result is an undefined Operation.
Operation train_op(GraphBuilder* b, size_t first_effect, const SourceLocation& loc);

}  // namespace weft::optim::detail
