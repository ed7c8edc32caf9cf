// Checkpoint: saves and restores the variables of models, optimizers and plain Variables, by
// object path, in a safetensors file (the tf.train.Checkpoint of weft).
//
//   Checkpoint ckpt({{"model", model}, {"optimizer", opt}});
//   ckpt.save("run/ckpt.safetensors");
//   ckpt.restore("run/ckpt.safetensors");
//
// Paths: a module's variables sit under its key ("model/dense/kernel", "model/dense_1/bias";
// layers are named per container, see nn::child_names), a plain Variable under its key, and an
// optimizer keeps "optimizer/iterations" and one entry per slot, named after the path of the
// variable it serves ("optimizer/model/dense/kernel/m"). Slots of variables that are not in the
// checkpoint are not saved (they would have no stable name).
//
// Restoring checks every entry's dtype and shape against its variable before changing anything
// (InvalidArgument naming the entry), and a variable with no entry in the file is a NotFound
// naming it, unless RestoreOptions::allow_missing. Entries for variables that do not exist yet
// (a layer not called yet, a slot before the first step) are kept and applied when they are
// built. The same file restores eager variables and the variables of a TF1 Graph (set directly,
// so the Session skips their initialisers). The file loads in Python's `safetensors` and in
// PyTorch.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "api/nn/module.h"
#include "api/optim/optimizers.h"
#include "api/variable.h"

namespace weft {

// What a checkpoint can hold: a module (layer or model), an optimizer, or a Variable. Handles,
// so the checkpoint sees the same state as the caller.
class Trackable {
 public:
  Trackable(const nn::Module& module) : object_(module) {}           // NOLINT: implicit by design
  Trackable(const optim::Optimizer& optimizer) : object_(optimizer) {}  // NOLINT
  Trackable(const Variable& variable) : object_(variable) {}            // NOLINT

  const nn::Module* module() const { return std::get_if<nn::Module>(&object_); }
  const optim::Optimizer* optimizer() const { return std::get_if<optim::Optimizer>(&object_); }
  const Variable* variable() const { return std::get_if<Variable>(&object_); }

 private:
  std::variant<nn::Module, optim::Optimizer, Variable> object_;
};

struct RestoreOptions {
  // Restore what the file has and leave other variables as they are (TF's expect_partial).
  bool allow_missing = false;
};

// What a restore did, by checkpoint path.
struct RestoreReport {
  std::vector<std::string> restored;  // set now
  std::vector<std::string> deferred;  // kept for variables not built yet
  std::vector<std::string> missing;   // variables the file has no entry for (allow_missing only)
  std::vector<std::string> unused;    // entries that match nothing in this checkpoint
};

class Checkpoint {
 public:
  // Keys are non-empty, distinct, and contain no '/' (it separates path components).
  Checkpoint(std::vector<std::pair<std::string, Trackable>> objects);  // NOLINT: braced lists

  // Every variable a save writes now, with its path, in a stable order: the objects in the order
  // given, optimizers' entries after the variables they serve. InvalidArgument if two differ
  // yet share a path.
  std::vector<std::pair<std::string, Variable>> variables() const;

  // Writes every variable's value (atomically: a crash mid-save leaves any previous file
  // intact). FailedPrecondition if a variable has no value yet (a Graph variable whose Session
  // has not run).
  void save(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;
  RestoreReport restore(const std::string& path, const RestoreOptions& options = {}) const;

  const std::vector<std::pair<std::string, Trackable>>& objects() const { return objects_; }

 private:
  std::vector<std::pair<std::string, Trackable>> objects_;
};

}  // namespace weft
