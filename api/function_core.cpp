#include "api/function_core.h"

#include <atomic>
#include <bit>
#include <iostream>
#include <optional>

#include "api/context.h"
#include "api/devices.h"
#include "api/function_gradient.h"
#include "api/graph_builder.h"
#include "comm/step_collectives.h"
#include "runtime/device.h"
#include "scheduler/graph_compiler.h"

namespace weft {

namespace {
std::atomic<bool> g_run_eagerly{false};

bool process_has_gpu() {
  static const bool has = [] {
    for (Device* d : local_devices())
      if (d->type() != DeviceType::CPU) return true;
    return false;
  }();
  return has;
}

// Where a call's ops run when the body names no device: the innermost DeviceScope around the
// call, else where eager execution would run them. Eager runs an op without a scope on its first
// input's device (api/dispatch.cpp), so a function whose first argument is on a GPU runs there,
// and one given host tensors (or none) runs on the CPU, exactly as its eager calls would: the
// traced results are the eager ones, bit for bit (a GPU's NaNs and transcendentals differ in
// their last bits from the CPU's). Left to the cost model instead, a function fed host tensors
// could land on the GPU. Only a process with a GPU has that choice to pin: with CPUs alone, the
// request stays empty and the placer spreads the ops over the logical CPUs as before.
//
// Part of every trace's key, as tf.function keys its traces by the device scope; empty (nothing
// to compare or copy) for calls with no device to pin, the common case on a machine without a GPU.
// The view stays valid for the call: a scope's name lives while the scope does, devices forever.
std::string_view device_of_call(std::span<const Tensor> args) {
  const std::vector<std::string>& scopes = eager_context().device_stack;
  if (!scopes.empty()) return scopes.back();
  if (!process_has_gpu()) return {};
  Device* eager = args.empty() || !args[0].defined() || args[0].is_symbolic() ? cpu_device() : args[0].device_ptr();
  return eager->type() == DeviceType::CPU ? std::string_view("/device:CPU") : std::string_view(eager->name());
}
}  // namespace

void run_functions_eagerly(bool eagerly) { g_run_eagerly = eagerly; }
bool functions_run_eagerly() { return g_run_eagerly; }

bool TensorSpec::accepts(const Tensor& t) const {
  if (t.dtype() != dtype || t.rank() != shape.rank()) return false;
  for (int64_t i = 0; i < shape.rank(); ++i)
    if (shape[i] >= 0 && shape[i] != t.shape()[i]) return false;
  return true;
}

std::string TensorSpec::to_string() const { return std::string(dtype_name(dtype)) + shape.to_string(); }

struct FunctionCore::Concrete {
  std::vector<TensorSpec> specs;
  std::string static_key;
  std::string device;  // where it was traced (device_of_call), pinned for its ops

  std::unique_ptr<CompiledGraph> compiled;
  // The trace before the passes, whose ops all have gradients: what a tape differentiates.
  std::shared_ptr<const GraphIR> raw;
  // How a call under one recording tape runs, decided on the first such call (under mu_).
  std::optional<TapedFunction::Made> taped;

  bool matches(std::span<const Tensor> args, const std::string& key, std::string_view where) const {
    if (key != static_key || where != device || args.size() != specs.size()) return false;
    for (size_t i = 0; i < args.size(); ++i)
      if (!specs[i].accepts(args[i])) return false;
    return true;
  }
};

FunctionCore::FunctionCore(FunctionOptions options) : options_(std::move(options)) {}
FunctionCore::~FunctionCore() = default;

std::vector<TensorSpec> FunctionCore::specs_for(std::span<const Tensor> args, const std::string& static_key,
                                                std::string_view device) const {
  std::vector<TensorSpec> specs;
  for (const Tensor& t : args) specs.push_back({t.dtype(), t.shape()});
  if (!options_.relax_shapes) return specs;
  // Relaxing: where an earlier trace with the same dtypes, ranks and non-tensor values saw other
  // sizes, the dim becomes unknown; the relaxed trace then serves every later size.
  for (const auto& c : cache_) {
    if (c->static_key != static_key || c->device != device || c->specs.size() != specs.size()) continue;
    bool same_kind = true;
    for (size_t i = 0; i < specs.size() && same_kind; ++i)
      same_kind = c->specs[i].dtype == specs[i].dtype && c->specs[i].shape.rank() == specs[i].shape.rank();
    if (!same_kind) continue;
    for (size_t i = 0; i < specs.size(); ++i)
      for (int64_t d = 0; d < specs[i].shape.rank(); ++d)
        if (c->specs[i].shape[d] != specs[i].shape[d]) specs[i].shape[d] = -1;
  }
  return specs;
}

std::unique_ptr<FunctionCore::Concrete> FunctionCore::trace(const std::vector<TensorSpec>& specs,
                                                            const std::string& static_key, std::string_view device,
                                                            const Body& body) {
  auto c = std::make_unique<Concrete>();
  c->specs = specs;
  c->static_key = static_key;
  c->device = device;
  auto graph = std::make_shared<GraphIR>();
  GraphBuilder builder(graph, GraphBuilder::Mode::kFunction);
  if (tracing_count_ > 0)
    builder.set_variable_creation_allowed(
        false, "weft::function '" + options_.name +
                   "' creates a variable while retracing; variables may only be created on the first trace "
                   "(create them outside the function, or only when they do not exist yet)");
  const auto here = std::source_location::current();
  {
    // The tapes recording around the call must not see the symbolic ops of the trace.
    ObserversHidden hidden;
    // The device eager execution would use, where no DeviceScope says (device_of_call).
    std::optional<DeviceScope> pinned;
    if (!device.empty() && current_device_request().empty()) pinned.emplace(std::string(device));
    RecorderScope recording(&builder);
    std::vector<Tensor> args;
    for (size_t i = 0; i < specs.size(); ++i)
      args.push_back(builder.placeholder(specs[i].dtype, specs[i].shape, "input_" + std::to_string(i), here));
    std::vector<Tensor> results = body(args);
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].defined())
        throw InvalidArgument("[function '" + options_.name + "'] result " + std::to_string(i) +
                              " is an empty Tensor handle");
      graph->results.push_back(builder.endpoint_of(results[i], here));
    }
  }
  ++tracing_count_;
  c->raw = std::make_shared<const GraphIR>(graph->clone());
  CompileSpec spec;
  for (int32_t a : graph->args) spec.feeds.push_back({a, 0});
  spec.fetches = graph->results;
  spec.targets = builder.side_effects();
  c->compiled = std::make_unique<CompiledGraph>(std::move(*graph), std::move(spec),
                                                CompileOptions{.optimize = options_.optimize,
                                                               .name = "function '" + options_.name + "'",
                                                               .collectives = &process_step_collectives()});
  return c;
}

void FunctionCore::note_call(const Concrete* used, bool traced, std::span<const Tensor> args,
                             const std::string& static_key, std::string_view device) {
  if (traced && last_) {
    // Say what changed since the previous call: that is what made this one retrace.
    std::string cause;
    if (device != last_->device) {
      cause = "it was called for another device ('" + last_->device + "', then '" + std::string(device) +
              "'): a trace runs where it was traced, so each device has its own";
    } else if (static_key != last_->static_key) {
      cause = "the structure or non-tensor values of its arguments changed from (" + last_->static_key + ") to (" +
              static_key + "); pass values that change as tensors";
    } else if (args.size() == last_->specs.size()) {
      for (size_t i = 0; i < args.size() && cause.empty(); ++i)
        if (!last_->specs[i].accepts(args[i]))
          cause = "argument " + std::to_string(i) + " changed from " + last_->specs[i].to_string() + " to " +
                  TensorSpec{args[i].dtype(), args[i].shape()}.to_string() +
                  "; use FunctionOptions{.relax_shapes = true} or an input_signature";
    }
    if (!cause.empty()) last_retrace_cause_ = cause;
  }
  history_ = ((history_ << 1) | (traced ? 1u : 0u)) & 0x3ffu;
  ++calls_;
  last_ = used;
  steady_.store(history_ == 0 && calls_ >= 10 ? used : nullptr, std::memory_order_release);
  if (!warned_ && calls_ >= 5 && std::popcount(history_) >= 5 && tracing_count_ > 1) {
    warned_ = true;
    std::cerr << "weft: warning: function '" << options_.name << "' traced " << std::popcount(history_)
              << " times in its last " << std::min(calls_, 10) << " calls; tracing is expensive. It retraced because "
              << (last_retrace_cause_.empty() ? std::string("its signature changed") : last_retrace_cause_) << ".\n";
  }
}

FunctionCore::Concrete& FunctionCore::find_or_trace(std::span<const Tensor> args, const std::string& static_key,
                                                    std::string_view device, const Body& body) {
  for (const Tensor& t : args) {
    if (!t.defined()) throw InvalidArgument("[function '" + options_.name + "'] an argument is an empty Tensor handle");
    if (t.is_symbolic())
      throw InvalidArgument("[function '" + options_.name + "'] argument '" + t.name() +
                            "' is symbolic outside of its graph");
  }
  if (!options_.input_signature.empty()) {
    const auto& sig = options_.input_signature;
    bool ok = sig.size() == args.size();
    for (size_t i = 0; ok && i < args.size(); ++i) ok = sig[i].accepts(args[i]);
    if (!ok) {
      std::string want, got;
      for (size_t i = 0; i < sig.size(); ++i) want += (i ? ", " : "") + sig[i].to_string();
      for (size_t i = 0; i < args.size(); ++i)
        got += (i ? ", " : "") + TensorSpec{args[i].dtype(), args[i].shape()}.to_string();
      throw InvalidArgument("[function '" + options_.name + "'] input_signature is (" + want + "), called with (" +
                            got + ")");
    }
  }
  for (size_t i = 0; i < cache_.size(); ++i) {
    if (!cache_[i]->matches(args, static_key, device)) continue;
    if (i) std::rotate(cache_.begin(), cache_.begin() + static_cast<std::ptrdiff_t>(i),
                       cache_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    note_call(cache_.front().get(), false, args, static_key, device);
    return *cache_.front();
  }
  std::vector<TensorSpec> specs = options_.input_signature.empty() ? specs_for(args, static_key, device)
                                                                   : options_.input_signature;
  cache_.insert(cache_.begin(), trace(specs, static_key, device, body));
  note_call(cache_.front().get(), true, args, static_key, device);
  return *cache_.front();
}

std::vector<Tensor> FunctionCore::call(std::span<const Tensor> args, const std::string& static_key, const Body& body) {
  // Called while another function traces: inline into that trace. With tracing off: run eagerly.
  if (current_builder() || functions_run_eagerly()) return body(args);
  if (!eager_context().observers.empty()) return call_under_tape(args, static_key, body);
  const std::string_view device = device_of_call(args);
  const CompiledGraph* exec = nullptr;
  if (const Concrete* steady = steady_.load(std::memory_order_acquire)) {
    bool plain = true;  // concrete tensors; anything else takes the slow path and its errors
    for (const Tensor& t : args) plain &= t.defined() && !t.is_symbolic();
    if (plain && steady->matches(args, static_key, device)) exec = steady->compiled.get();
  }
  if (!exec) {
    std::lock_guard lock(mu_);
    exec = find_or_trace(args, static_key, device, body).compiled.get();
  }
  // find_or_trace matched the arguments against the signature the graph was traced for.
  return exec->run_checked_feeds(args);
}

std::vector<Tensor> FunctionCore::call_under_tape(std::span<const Tensor> args, const std::string& static_key,
                                                  const Body& body) {
  // Nested or parallel tapes: see api/function_gradient.h for why they get eager execution.
  if (eager_context().observers.size() > 1) return body(args);
  TapedFunction::Made taped;
  const CompiledGraph* exec = nullptr;
  {
    std::lock_guard lock(mu_);
    Concrete& c = find_or_trace(args, static_key, device_of_call(args), body);
    if (!c.taped) c.taped = TapedFunction::make(*c.raw, options_.optimize);
    taped = *c.taped;
    exec = c.compiled.get();
  }
  switch (taped.kind) {
    case TapedFunction::Kind::kOneOp: return taped.function->call(args);
    case TapedFunction::Kind::kNotNeeded: return exec->run_checked_feeds(args);
    case TapedFunction::Kind::kEager: break;
  }
  return body(args);
}

std::shared_ptr<GraphIR> FunctionCore::graph_for(std::span<const Tensor> args, const std::string& static_key,
                                                 const Body& body) {
  std::lock_guard lock(mu_);
  return find_or_trace(args, static_key, device_of_call(args), body).compiled->shared_graph();
}

}  // namespace weft
