// A weft::function call under a recording GradientTape, recorded as ONE op (TensorFlow records a
// tf.function call the same way): the traced forward graph runs, and the tape holds a
// PartitionedCall entry whose gradient runs a traced backward graph.
//
// Both graphs come from one trace of "forward + gradient": the forward trace (before the pass
// pipeline, whose fused ops have no gradients) is fed node by node to a GradientTape while a
// GraphBuilder records, so the tape's gradient functions add the backward nodes to the same
// graph. Then it is cut in two: the forward nodes make the forward graph, which also returns,
// as hidden results, every intermediate the backward nodes read (TensorFlow's approach: nothing
// is recomputed); the rest make the backward graph, whose arguments are the call's inputs (the
// tensor arguments, then the value of each variable the trace reads, which are the op's inputs
// on the tape, so gradients reach the variables), the hidden intermediates and one output
// gradient per floating result. The backward graph is specialised, pruned and optimised once per
// set of inputs a tape wants gradients for (gradients nobody asked for cost nothing), and run by
// an Executor.
//
// What runs the body eagerly instead (the behaviour before this existed, always correct):
//   - a trace that writes a variable (assign, apply_gradients): the value a later read sees
//     depends on the write, which a tape does not differentiate through (assignments are not
//     differentiable), so the one-op gradient is not well defined; eager gives the tape each
//     read as it happens;
//   - a trace with an op that has no gradient, or whose gradient cannot be traced;
//   - two or more tapes recording at the call (nested tapes, higher-order gradients): a second
//     tape would have to differentiate the backward graph's use of the hidden intermediates.
// A trace with no floating result, or no floating input (argument or variable), cannot carry a
// gradient: it runs the plain forward graph and is not recorded.
//
// A gradient asked while another tape records (a tape opened after the call, around the first
// one's gradient) replays the backward graph op by op through the dispatch funnel, so that tape
// sees the backward ops exactly as it would in eager mode.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "api/context.h"
#include "runtime/graph.h"
#include "runtime/tensor.h"

namespace weft {

class CompiledGraph;
struct GradContext;

class TapedFunction : public std::enable_shared_from_this<TapedFunction> {
 public:
  enum class Kind {
    kOneOp,      // record the call as one op
    kNotNeeded,  // no gradient can flow through the call: run the forward graph, record nothing
    kEager,      // run the body eagerly (see above)
  };
  struct Made {
    Kind kind;
    std::shared_ptr<TapedFunction> function;  // set for kOneOp
  };
  // `raw`: the function's trace before the pass pipeline; `optimize`: run the passes on the
  // forward and backward graphs.
  static Made make(const GraphIR& raw, bool optimize);

  // Runs the forward graph on `args` (matched against the trace's signature by the caller),
  // records the call on the recording tapes and returns the function's results.
  std::vector<Tensor> call(std::span<const Tensor> args) const;

  // The gradient of a recorded call (registered for the PartitionedCall op).
  std::vector<Tensor> backward(const GradContext& ctx) const;

  struct Private {};
  explicit TapedFunction(Private) {}
  ~TapedFunction();

 private:
  struct Variant {
    std::shared_ptr<const GraphIR> replay;  // pruned, not optimised: for call_graph
    std::unique_ptr<CompiledGraph> executor;
    std::vector<size_t> inputs;  // the input each result is the gradient of
  };
  void build(const GraphIR& raw, bool optimize);
  const Variant& variant(const std::vector<bool>& wanted) const;

  bool optimize_ = true;
  size_t num_args_ = 0;
  size_t num_results_ = 0;
  std::vector<std::shared_ptr<VariableState>> variables_;  // read by the trace, in input order
  std::vector<bool> result_has_grad_;                      // floating results take an output gradient
  std::shared_ptr<GraphIR> forward_;                       // results, then the hidden intermediates
  std::unique_ptr<CompiledGraph> forward_executor_;
  std::shared_ptr<const GraphIR> backward_;  // every input's gradient; variants pick some
  std::vector<Endpoint> gradient_of_;        // per input, in backward_; node -1: none
  mutable std::mutex mu_;
  mutable std::map<std::vector<bool>, std::unique_ptr<Variant>> variants_;
};

}  // namespace weft
