// Variable: mutable, named state that survives across steps (weights, optimizer slots).
//
//   Variable w(random::normal({784, 128}, 0, 0.1, /*seed=*/1), "w");
//   Tensor y = matmul(x, w);          // a Variable works wherever a Tensor does
//   w.assign_sub(lr * grad);
//
// Every call takes the caller's source line (a defaulted last argument): in a graph, the read and
// assignment nodes it makes say where the user wrote it.
//
// A Variable is a handle: copies share the same state. Reading it while a GradientTape records
// makes the tape watch it (trainable variables only), so tape.gradient(loss, {w}) works without
// an explicit watch. Assignments update the buffer in place when nothing else holds the old
// value, so an optimizer step does not allocate a new copy of every weight.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>

#include "runtime/tensor.h"
#include "runtime/variable_state.h"

namespace weft {

class GraphBuilder;

class Variable {
 public:
  Variable() = default;
  // The variable takes the dtype and shape of `initial_value` (copied, so later changes to the
  // variable never show through `initial_value`).
  // In a TF1 Graph the initialiser node is placed at `loc`.
  explicit Variable(const Tensor& initial_value, const std::string& name = "Variable", bool trainable = true,
                    const std::source_location& loc = std::source_location::current());
  // Another handle on existing state (a graph's variables are held as states).
  explicit Variable(std::shared_ptr<VariableState> state) : state_(std::move(state)) {}

  // The current value (a tensor the caller may keep: later assignments do not change it).
  Tensor value(const std::source_location& loc = std::source_location::current()) const;
  // An implicit read has no line of its own: in a graph it takes that of the op that reads it.
  operator Tensor() const { return read(std::nullopt); }

  // Each returns the new value, like TensorFlow's assign. In a graph the assignment is a node
  // that runs only when something asks for it: fetch the returned tensor (or run it as a target)
  // and the assignment runs first; a plain read of the variable does not run it.
  Tensor assign(const Tensor& value, const std::source_location& loc = std::source_location::current());
  Tensor assign_add(const Tensor& delta, const std::source_location& loc = std::source_location::current());
  Tensor assign_sub(const Tensor& delta, const std::source_location& loc = std::source_location::current());

  // Sets the value directly, outside any graph being built or traced: a checkpoint restore,
  // which also fills the variables of a TF1 Graph before its Session runs (their initialisers
  // are then skipped). `value` must be concrete, of the variable's dtype and shape; it is placed
  // on the device of the current value (the CPU when there is none yet).
  void restore(const Tensor& value);

  // The value's buffer, first made private to this variable (copied if anything else holds it),
  // for kernels that update it in place (the fused optimizer ops).
  Tensor value_for_update(const std::source_location& loc = std::source_location::current());

  const std::string& name() const;
  bool trainable() const;
  DType dtype() const;
  const Shape& shape() const;
  bool defined() const { return state_ != nullptr; }
  // Identity of the shared state: equal for copies of one Variable.
  const VariableState* id() const { return state_.get(); }

  std::shared_ptr<VariableState> state() const { return state_; }

 private:
  Tensor read(const std::optional<std::source_location>& loc) const;
  Tensor value_after(GraphBuilder& b, int32_t write, const std::source_location& loc) const;
  // Makes `combine(value, delta)` the new value; it must keep the variable's shape.
  using Combine = Tensor (*)(const Tensor&, const Tensor&, const std::source_location&);
  Tensor assign_combined(const Tensor& delta, Combine combine, const char* op, const std::source_location& loc);
  VariableState& checked() const;
  std::shared_ptr<VariableState> state_;
};

// How many times a variable was written outside any graph (assign, restore, an eager optimizer
// step) in this process. Data-parallel training compares it between steps: when the chief's
// variables changed outside its steps (a checkpoint restore), the replicas get them again.
uint64_t eager_variable_writes();
void note_eager_variable_write();

// Called by Variable::value(); GradientTape registers the hook.
using VariableReadHook = void (*)(const Variable& var, const Tensor& value);
void set_variable_read_hook(VariableReadHook hook);

}  // namespace weft
