// The per-thread eager context: which device new ops go to (DeviceScope) and the hooks through
// which GradientTape and tracing observe the dispatch funnel. Thread-local, so two threads can
// trace or record independently.
#pragma once

#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "runtime/attr.h"
#include "runtime/device.h"
#include "runtime/op_registry.h"
#include "runtime/tensor.h"

namespace weft {

// Receives every eagerly executed op while installed (GradientTape implements it).
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void on_op(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                     const Attrs& attrs) = 0;
};

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
};

EagerContext& eager_context();

}  // namespace weft
