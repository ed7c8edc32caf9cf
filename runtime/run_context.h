// What a kernel may ask of the executor that runs it: the graph's variables, a way to run a
// function-body subgraph (the branches of If, the condition and body of While), and, for Send,
// Recv and other asynchronous kernels, the step they belong to, where tensors meet, where
// collectives run and how the step is cancelled. Null in eager mode, where the api layer does
// these things directly (an eager collective gets a run context with only its collectives).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/tensor.h"
#include "runtime/variable_state.h"

namespace weft {

class CancellationManager;
class Collectives;
class Device;
struct KernelContext;
class GraphIR;
class Rendezvous;

class RunContext {
 public:
  virtual ~RunContext() = default;
  // The variable the running graph knows by `name`; NotFound otherwise.
  virtual VariableState& variable(std::string_view name) = 0;
  // Runs `body` (a graph with args and results) on `args` and returns its results. Its nodes run
  // on `device`, where the calling node (an If, a While) runs.
  virtual std::vector<Tensor> call(const GraphIR& body, std::span<const Tensor> args, Device& device) = 0;

  // The defaults describe a run of one device that nothing else takes part in.
  // The id of the running step, part of every rendezvous key; 0 when steps are not numbered.
  virtual int64_t step_id() const { return 0; }
  // Where this step's Send and Recv kernels exchange tensors; null when the run has none.
  virtual Rendezvous* rendezvous() const { return nullptr; }
  // Cancelled with the step's first error, anywhere; null when the run cannot be cancelled.
  virtual CancellationManager* cancellation() const { return nullptr; }
  // Where this step's collective kernels take part in their groups (runtime/collectives.h); null
  // when the run has none.
  virtual Collectives* collectives() const { return nullptr; }
  // Said by an asynchronous kernel whose wait for another partition is over and which now only
  // finishes work of its own (a Recv copying what arrived onto its GPU, or down from it): a step
  // whose every unfinished kernel waits for a tensor that no partition will send is stuck and
  // fails, and one whose kernels are copying is not. `kernel` is the context the kernel got.
  virtual void async_wait_over(const KernelContext& /*kernel*/) {}
};

}  // namespace weft
