// The collectives a process's steps run their collective kernels on (runtime/collectives.h):
// host tensors through the process's collective executor (comm/collective_executor.h), GPU
// tensors through NCCL (comm/nccl/nccl_collectives.h). Whoever runs a step or an eager collective
// hands it to the kernels through their run context (StepOptions::collectives).
#pragma once

#include "runtime/collectives.h"

namespace weft {

Collectives& process_step_collectives();

}  // namespace weft
