// The per-thread eager context: which device new ops go to (DeviceScope) and the hooks through
// which GradientTape and tracing observe the dispatch funnel. Thread-local, so two threads can
// trace or record independently.
#pragma once

#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "api/op_observer.h"
#include "runtime/attr.h"
#include "runtime/device.h"
#include "runtime/op_registry.h"
#include "runtime/tensor.h"

namespace weft {

// Turns dispatched ops into graph nodes while installed (tracing and GraphScope implement it).
class OpRecorder {
 public:
  virtual ~OpRecorder() = default;
  virtual std::vector<Tensor> record(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                                     const InferContext& inferred, const std::source_location& where) = 0;
  // Called from a catch block when the op's inference failed: raises the error again with the
  // name the node would have had and the user's source line.
  [[noreturn]] virtual void rethrow_with_context(const OpDef& op, const Attrs& attrs,
                                                 const std::source_location& where) = 0;
};

struct EagerContext {
  std::vector<std::string> device_stack;  // requested device names, innermost last
  Device* scoped_device = nullptr;        // resolved innermost DeviceScope, null: default
  std::vector<OpObserver*> observers;     // not owned
  OpRecorder* recorder = nullptr;         // not owned
  std::vector<std::string> name_scopes;   // NameScope prefixes, outermost first
  // While set, every graph node made on this thread takes this line instead of the one its
  // front-end saw (see CallerLocation). Not owned.
  const std::source_location* caller_location = nullptr;
};

EagerContext& eager_context();

// Hides the tapes recording on this thread for the scope's lifetime: from the symbolic ops of a
// trace (of a function, or of its gradient), which are no part of their computation, and from
// the arithmetic of an assignment, which is not differentiable.
class ObserversHidden {
 public:
  ObserversHidden() { saved_.swap(eager_context().observers); }
  ~ObserversHidden() { saved_.swap(eager_context().observers); }
  ObserversHidden(const ObserversHidden&) = delete;
  ObserversHidden& operator=(const ObserversHidden&) = delete;

 private:
  std::vector<OpObserver*> saved_;
};

// Gives every graph node made in its lifetime the user's line `loc`: for API calls that make
// many nodes through other front-ends, such as GradientTape::gradient, whose nodes would
// otherwise carry the lines of the gradient functions. The outermost scope wins.
class CallerLocation {
 public:
  explicit CallerLocation(const std::source_location& loc) : saved_(eager_context().caller_location) {
    if (!saved_) eager_context().caller_location = &loc;
  }
  ~CallerLocation() { eager_context().caller_location = saved_; }
  CallerLocation(const CallerLocation&) = delete;
  CallerLocation& operator=(const CallerLocation&) = delete;

 private:
  const std::source_location* saved_;
};

}  // namespace weft
