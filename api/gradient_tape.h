// GradientTape: records eager ops while alive and differentiates through them.
//
//   Variable w(constant({{1.f}}));
//   GradientTape tape;                       // trainable Variables are watched when read
//   Tensor loss = w * w;
//   Tensor g = tape.gradient(loss, std::vector<Variable>{w})[0];   // [[2]]
//
// Only ops that touch something watched are kept, so a tape around a whole training step holds
// exactly what backprop needs. A non-persistent tape answers once, then frees what it held;
// asking again throws FailedPrecondition. Tapes nest: the gradient computation of an inner tape
// is recorded by the outer one, which gives higher-order gradients.
#pragma once

#include <memory>
#include <source_location>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "api/op_observer.h"
#include "api/variable.h"

namespace weft {

class GradientTape final : public OpObserver {
 public:
  explicit GradientTape(bool persistent = false);
  ~GradientTape() override;
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  void watch(const Tensor& t);
  void watch(const Variable& v);

  // d(sum of target)/d(source) for each source; an unconnected source gets zeros of its shape.
  // In a graph, the gradient nodes carry the caller's line.
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               const std::source_location& loc = std::source_location::current());
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Variable>& sources,
                               const std::source_location& loc = std::source_location::current());
  Tensor gradient(const Tensor& target, const Tensor& source,
                  const std::source_location& loc = std::source_location::current());
  Tensor gradient(const Tensor& target, const Variable& source,
                  const std::source_location& loc = std::source_location::current());

  // Stops recording until resume() (like `with tape.stop_recording():`).
  void stop_recording();
  void resume();

  // Ops currently held (for tests and memory accounting).
  size_t num_recorded_ops() const;

  void on_op(const OpDef& op, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
             const Attrs& attrs) override;
  void on_variable_read(const Variable& v, const Tensor& value);

 private:
  struct Entry;  // one recorded op (gradient_tape.cpp)
  void install();
  void uninstall();
  bool tracked(const Tensor& t) const;
  void track(const Tensor& t);
  std::vector<Tensor> backprop(const Tensor& target, const std::vector<std::vector<Tensor>>& sources);

  bool persistent_;
  bool used_ = false;
  bool installed_ = false;
  std::vector<Entry> entries_;
  std::vector<Tensor> watched_;  // keeps watched tensors alive so their addresses stay unique
  std::unordered_set<const TensorImpl*> tracked_;
  std::unordered_map<const VariableState*, std::vector<Tensor>> variable_reads_;
};

}  // namespace weft
