// nn::Module: a callable holder of variables, the base of layers and models (like tf.Module /
// keras.Layer). Modules are handles: copies share the same layer and its variables.
//
//   nn::Sequential model{nn::Dense(128, nn::relu), nn::Dropout(0.2), nn::Dense(10)};
//   Tensor logits = model(x, /*training=*/true);     // variables are built on the first call
//   std::vector<Variable> vars = model.trainable_variables();   // stable order and names
//   model.named_variables();   // {"dense/kernel", ...}: the paths a Checkpoint saves them under
#pragma once

#include <memory>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

#include "api/variable.h"
#include "runtime/tensor.h"

namespace weft::nn {

using NamedVariables = std::vector<std::pair<std::string, Variable>>;

// A restore that arrived before some variables existed: layers build their variables on the
// first call, and a checkpoint may be restored before that (as in Keras and TF2).
class VariableRestorer {
 public:
  virtual ~VariableRestorer() = default;
  // Called right after a variable is built; `path` is its full path in the checkpoint.
  virtual void created(const std::string& path, const Variable& var) = 0;
};

class ModuleImpl;

class Module {
 public:
  Module() = default;
  explicit Module(std::shared_ptr<ModuleImpl> impl) : impl_(std::move(impl)) {}

  // In a graph, the nodes a built-in layer makes carry the caller's line, `loc`.
  Tensor operator()(const Tensor& x, bool training = false,
                    const std::source_location& loc = std::source_location::current()) const;
  std::vector<Variable> variables() const;
  std::vector<Variable> trainable_variables() const;
  NamedVariables named_variables() const;
  const std::string& name() const;
  bool defined() const { return impl_ != nullptr; }
  ModuleImpl* impl() const { return impl_.get(); }

 protected:
  std::shared_ptr<ModuleImpl> impl_;
};

class ModuleImpl {
 public:
  // `kind` ("dense") names the module inside a parent; it defaults to `name`.
  explicit ModuleImpl(std::string name, std::string kind = "")
      : name_(std::move(name)), kind_(kind.empty() ? name_ : std::move(kind)) {}
  virtual ~ModuleImpl() = default;
  virtual Tensor call(const Tensor& x, bool training) = 0;
  // The call made by Module's call operator, with the caller's line: the built-in layers put
  // their graph nodes there. The default ignores it and calls call().
  virtual Tensor call_at(const Tensor& x, bool training, const std::source_location& where) {
    return call(x, training);
  }
  // Own variables first, then those of sub-modules, in creation order. The default: the
  // registered variables, then each registered child's variables, in registration order.
  virtual std::vector<Variable> variables() const;
  // The variables built so far with their paths below this module ("kernel", "dense_1/bias"),
  // in the order of variables(). The default gives registered variables their registered name
  // and a registered child's variables "<child>/<path>"; a module that registers nothing and
  // overrides variables() gets each variable's own name. Layers and containers give paths that
  // do not depend on how many layers the process made before.
  virtual NamedVariables named_variables() const;
  // Keeps `restorer` for variables this module (or a sub-module) builds later; `prefix` is this
  // module's path. The default passes it on to registered children with the child's path.
  virtual void defer_restore(std::shared_ptr<VariableRestorer> restorer, const std::string& prefix);
  const std::string& name() const { return name_; }
  const std::string& kind() const { return kind_; }

 protected:
  // A layer calls this right after building a variable, so a pending restore can set its value.
  void variable_built(const std::string& relative_path, const Variable& var);

  // Models of one's own (torch's register_module, Keras's tracked attributes): the child's
  // variables, checkpoint paths ("<name>/kernel") and deferred restores become this module's,
  // in registration order, after its registered variables. Returns `module`, so
  //   conv1_ = register_module("conv1", nn::Dense(64));
  // InvalidArgument for an empty handle, a name that is empty, holds '/', or is taken.
  Module register_module(const std::string& name, Module module);
  // A variable this module owns directly, saved as "<name>"; returns it.
  Variable register_variable(const std::string& name, Variable variable);
  const std::vector<std::pair<std::string, Module>>& registered_modules() const { return children_; }

 private:
  void check_new_name(const std::string& name, const char* what) const;

  std::string name_;
  std::string kind_;
  std::vector<std::pair<std::string, Module>> children_;
  NamedVariables own_;
  std::shared_ptr<VariableRestorer> restorer_;
  std::string restore_prefix_;
};


// Keras-style unique layer names: "dense", "dense_1", "dense_2", ... per base name, per process.
std::string unique_layer_name(const std::string& base);
// Resets the counters (tests and notebooks that rebuild models from scratch).
void reset_layer_names();

// The names children go by inside a container: their kind, numbered from the second of a kind
// on ("dense", "dense_1", "dropout"). Counted per container, not per process, so the same
// architecture has the same paths in every process and in every copy built in one process.
std::vector<std::string> child_names(const std::vector<Module>& children);

}  // namespace weft::nn
