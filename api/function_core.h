// The type-erased engine behind weft::function (api/function.h): the trace cache keyed on the
// call signature, tracing, the pass pipeline, the executors, and the retracing warning.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/tensor.h"

namespace weft {

class Executor;
class GraphIR;

// The dtype and shape a function argument must have; -1 dims accept any size.
struct TensorSpec {
  DType dtype = DType::Float32;
  Shape shape;
  bool accepts(const Tensor& t) const;
  std::string to_string() const;  // "float32(None, 784)"
};

struct FunctionOptions {
  // Retrace with unknown dims where calls disagree, instead of once per shape.
  bool relax_shapes = false;
  // Fixes the signature: one trace, and calls whose tensors do not match are rejected.
  std::vector<TensorSpec> input_signature;
  std::string name = "function";
  bool optimize = true;  // run the pass pipeline on each trace
};

// Turns tracing off everywhere (functions run their C++ body eagerly), for debugging.
void run_functions_eagerly(bool eagerly);
bool functions_run_eagerly();

// The traced body: called at trace time with symbolic stand-ins for the tensor arguments, it
// returns the results. A non-owning reference (the body lives for the call that may trace it), so
// a call that hits the cache allocates nothing for it.
class FunctionBody {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionBody>)
  explicit FunctionBody(F& f)
      : obj_(&f), call_([](void* o, std::span<const Tensor> args) { return (*static_cast<F*>(o))(args); }) {}
  std::vector<Tensor> operator()(std::span<const Tensor> args) const { return call_(obj_, args); }

 private:
  void* obj_;
  std::vector<Tensor> (*call_)(void*, std::span<const Tensor>);
};

class FunctionCore {
 public:
  using Body = FunctionBody;

  explicit FunctionCore(FunctionOptions options);
  ~FunctionCore();

  // Runs the graph traced for this signature (tracing it first if there is none).
  std::vector<Tensor> call(std::span<const Tensor> args, const std::string& static_key, const Body& body);
  // The optimised graph for this signature (tracing it if needed).
  std::shared_ptr<GraphIR> graph_for(std::span<const Tensor> args, const std::string& static_key, const Body& body);
  int tracing_count() const { return tracing_count_; }
  const FunctionOptions& options() const { return options_; }

 private:
  struct Concrete;
  std::vector<Tensor> call_under_tape(std::span<const Tensor> args, const std::string& static_key, const Body& body);
  // `device`: where the call's unplaced ops run (device_of_call), part of the trace's key with
  // `static_key`, and pinned while tracing.
  Concrete& find_or_trace(std::span<const Tensor> args, const std::string& static_key, std::string_view device,
                          const Body& body);
  std::unique_ptr<Concrete> trace(const std::vector<TensorSpec>& specs, const std::string& static_key,
                                  std::string_view device, const Body& body);
  std::vector<TensorSpec> specs_for(std::span<const Tensor> args, const std::string& static_key,
                                    std::string_view device) const;
  void note_call(const Concrete* used, bool traced, std::span<const Tensor> args, const std::string& static_key,
                 std::string_view device);

  FunctionOptions options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Concrete>> cache_;  // most recently used first
  int tracing_count_ = 0;
  uint32_t history_ = 0;  // bit i: the i-th most recent call traced
  int calls_ = 0;
  bool warned_ = false;
  const Concrete* last_ = nullptr;  // the trace the previous call used
  std::string last_retrace_cause_;
  // The trace every one of the last 10 calls used, while that holds. A call that matches it needs
  // neither the lock nor the bookkeeping: the retracing history would only shift in another zero.
  // Traces live as long as this object, so the pointer never dangles.
  std::atomic<const Concrete*> steady_{nullptr};
};

}  // namespace weft
