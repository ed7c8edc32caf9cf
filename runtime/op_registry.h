// The op registry: one OpDef per op, registered once at startup by kernels/defs/<family>.cpp.
//
//   OpDef& def = op_registry().add({.name = "Relu", .display = "relu", .min_inputs = 1,
//                                   .max_inputs = 1, .infer = same_as_input0,
//                                   .flags = kElementwise});
//   const OpDef& relu = op_registry().get("Relu");   // NotFound if absent
//
// An OpDef says everything the engine needs to know about an op without running it: its arity,
// attributes, how output dtypes and shapes follow from the inputs (the infer function, which
// also validates and throws InvalidArgument before any kernel runs), flags, and a cost estimate
// for placement. Kernels hang off the OpDef, one per (device type, dtype); see kernel_registry.h.
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/attr.h"
#include "runtime/device_name.h"
#include "runtime/dtype.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace weft {

struct OpDef;
struct KernelContext;
using KernelFn = void (*)(KernelContext&);
// How an asynchronous kernel reports that it is done: null on success (its outputs are set),
// else the error. Called exactly once, on any thread.
using AsyncDone = std::function<void(std::exception_ptr error)>;
// A kernel that waits for something outside the graph (a Recv, a collective) without blocking a
// thread: it returns at once and calls `done` when its outputs are ready. The context it gets,
// with its input and output spans, stays valid until then.
using AsyncKernelFn = void (*)(KernelContext&, AsyncDone done);

enum OpFlags : uint32_t {
  kStateful = 1u << 0,        // must run even if nothing uses its outputs; never CSE'd or folded
  kElementwise = 1u << 1,     // output i depends on input element i only (after broadcasting)
  kCommutative = 1u << 2,     // f(a, b) == f(b, a)
  kForwardsInput = 1u << 3,   // output 0 shares input 0's buffer (a view); the kernel is optional
  kNotDifferentiable = 1u << 4,
  kSideEffect = 1u << 5,      // changes something outside its outputs (a variable, stderr): never pruned
  kSetsOutputs = 1u << 6,     // the kernel sets its outputs itself (Const, ReadVariable, If): none preallocated
  // A side effect that keeps no program order with the others (collectives): chaining the members
  // of a group, each waiting for the other devices, would deadlock them.
  kUnorderedSideEffect = 1u << 7,
  // Draws random numbers from its "seed" attribute, or, unseeded (-1), from the "stream_seed"
  // compilation gives it (runtime/random_seed.h): the executor numbers the node's runs
  // (KernelContext::execution) so every run of a compiled graph draws a new stream.
  kRandom = 1u << 8,
};

struct TensorMeta {
  DType dtype = DType::Float32;
  Shape shape;
};

struct Cost {
  double flops = 0;
  double bytes = 0;  // bytes read plus written
};

// What an infer function sees: the inputs' dtypes and shapes (concrete or symbolic tensors) and
// the attributes; it sets every output's dtype and shape or throws via fail().
class InferContext {
 public:
  InferContext(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs)
      : op_(op), inputs_(inputs), attrs_(attrs) {}

  const OpDef& op() const { return op_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  DType input_dtype(int i) const { return inputs_[i].dtype(); }
  const Shape& input_shape(int i) const { return inputs_[i].shape(); }
  const Tensor& input(int i) const { return inputs_[i]; }
  const Attrs& attrs() const { return attrs_; }

  void set_num_outputs(int n);
  int num_outputs() const { return num_outputs_; }
  void set_output(int i, DType dtype, Shape shape);
  const TensorMeta& output(int i) const { return i < kInline ? inline_[i] : more_[i - kInline]; }

  // Throws InvalidArgument("[display] message").
  [[noreturn]] void fail(const std::string& message) const;

 private:
  static constexpr int kInline = 2;
  const OpDef& op_;
  std::span<const Tensor> inputs_;
  const Attrs& attrs_;
  int num_outputs_ = 1;
  TensorMeta inline_[kInline];
  std::vector<TensorMeta> more_;
};

using InferFn = void (*)(InferContext&);
using CostFn = Cost (*)(const InferContext&);
// Derives from a node's attributes and input count what its kernels would otherwise derive at
// every call (a decoded program), once per node: the executor keeps the result beside the node
// and hands it to the kernel as KernelContext::prepared. Throws on attributes the kernel would
// reject; the node is then left unprepared, and the kernel reports the error when it runs.
using PrepareFn = std::shared_ptr<const void> (*)(const Attrs& attrs, int num_inputs);

struct AttrSpec {
  std::string name;
  AttrType type;
  bool required = true;
};

struct OpDef {
  std::string name;     // graph op type: "MatMul"
  std::string display;  // front-end name used in messages: "matmul"
  int min_inputs = 0;
  int max_inputs = 0;   // -1: any number
  int num_outputs = 1;  // -1: the infer function decides
  std::vector<AttrSpec> attrs;
  InferFn infer = nullptr;
  CostFn cost = nullptr;  // null: one flop per output element, bytes of inputs and outputs
  PrepareFn prepare = nullptr;  // null: the kernels derive everything from the attributes per call
  uint32_t flags = 0;
  int kernel_dtype_input = 0;  // input whose dtype selects the kernel; -1 selects by output 0
  // The String attributes that name files the kernel reads or writes: a graph is a program, and
  // tools say which of its nodes touch the file system (weft-run). Empty for pure ops.
  std::vector<std::string> file_attrs;

  KernelFn kernels[kNumDeviceTypes][kNumDTypes] = {};
  AsyncKernelFn async_kernels[kNumDeviceTypes][kNumDTypes] = {};

  bool has(OpFlags f) const { return (flags & f) != 0; }
  KernelFn kernel(DeviceType device, DType dtype) const {
    return kernels[static_cast<int>(device)][static_cast<int>(dtype)];
  }
  AsyncKernelFn async_kernel(DeviceType device, DType dtype) const {
    return async_kernels[static_cast<int>(device)][static_cast<int>(dtype)];
  }
  Cost estimate_cost(const InferContext& ctx) const;
};

class OpRegistry {
 public:
  // Registers a definition; InvalidArgument if the name is taken. The reference stays valid.
  OpDef& add(OpDef def);
  const OpDef* find(std::string_view name) const;
  // NotFound naming the op (and the closest registered names) when absent.
  const OpDef& get(std::string_view name) const;
  OpDef& mutable_get(std::string_view name);
  std::vector<const OpDef*> all() const;
  // A hash of every registered op's signature (name, inputs, outputs, attributes, flags) and of
  // which devices and dtypes have kernels, independent of registration order: two processes with
  // equal fingerprints run graphs alike (cluster/build_identity.h compares them at start-up).
  uint64_t fingerprint() const;

 private:
  mutable std::mutex mu_;
  std::deque<OpDef> defs_;  // deque: references stay valid as it grows
};

OpRegistry& op_registry();

}  // namespace weft
