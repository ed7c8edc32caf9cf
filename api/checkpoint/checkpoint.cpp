#include "api/checkpoint/checkpoint.h"

#include <memory>
#include <mutex>
#include <set>

#include "runtime/safetensors.h"

namespace weft {

namespace {

using Entries = std::map<std::string, Tensor>;

std::string describe(DType dtype, const Shape& shape) { return std::string(dtype_name(dtype)) + " " + shape.to_string(); }

void check_matches(const std::string& file, const std::string& path, const Tensor& value, DType dtype, const Shape& shape,
                   const std::string& what) {
  if (value.dtype() != dtype || value.shape() != shape)
    throw InvalidArgument("[checkpoint] '" + path + "' in " + file + " is " + describe(value.dtype(), value.shape()) +
                          ", but " + what + " is " + describe(dtype, shape));
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The slot entries of `optimizer_key` for the variable at `var_path`: "<key>/<var path>/<slot>",
// the slot name being the last component.
std::vector<std::pair<std::string, std::string>> slot_entries(const Entries& entries, const std::string& optimizer_key,
                                                              const std::string& var_path) {
  std::vector<std::pair<std::string, std::string>> out;  // (entry path, slot name)
  const std::string prefix = optimizer_key + "/" + var_path + "/";
  for (auto it = entries.lower_bound(prefix); it != entries.end() && starts_with(it->first, prefix); ++it) {
    std::string slot = it->first.substr(prefix.size());
    if (!slot.empty() && slot.find('/') == std::string::npos) out.emplace_back(it->first, slot);
  }
  return out;
}

// Entries waiting for variables that do not exist yet. Modules hold it until they build; each
// entry is dropped once applied, so what stays alive is only what is still waiting.
class PendingRestore final : public nn::VariableRestorer {
 public:
  PendingRestore(std::string file, Entries entries, std::vector<std::pair<std::string, optim::Optimizer>> optimizers)
      : file_(std::move(file)), entries_(std::move(entries)), optimizers_(std::move(optimizers)) {}

  void created(const std::string& path, const Variable& var) override {
    std::lock_guard lock(mu_);
    auto it = entries_.find(path);
    if (it != entries_.end()) {
      check_matches(file_, path, it->second, var.dtype(), var.shape(), "the variable built for it");
      Variable(var).restore(it->second);
      entries_.erase(it);
    }
    for (auto& [key, opt] : optimizers_) {
      for (auto& [entry, slot] : slot_entries(entries_, key, path)) {
        check_matches(file_, entry, entries_.at(entry), var.dtype(), var.shape(), "the variable '" + path + "' it serves");
        opt.restore_slot(var, slot, entries_.at(entry));
        entries_.erase(entry);
      }
    }
  }

 private:
  std::mutex mu_;  // layers may be built from several threads
  std::string file_;
  Entries entries_;
  std::vector<std::pair<std::string, optim::Optimizer>> optimizers_;
};

}  // namespace

Checkpoint::Checkpoint(std::vector<std::pair<std::string, Trackable>> objects) : objects_(std::move(objects)) {
  std::set<std::string> keys;
  for (const auto& [key, object] : objects_) {
    if (key.empty() || key.find('/') != std::string::npos)
      throw InvalidArgument("[checkpoint] key '" + key + "' must be non-empty and contain no '/'");
    if (!keys.insert(key).second) throw InvalidArgument("[checkpoint] key '" + key + "' is given twice");
    if (const nn::Module* m = object.module(); m && !m->defined())
      throw InvalidArgument("[checkpoint] '" + key + "' is an empty module handle");
    if (const Variable* v = object.variable(); v && !v->defined())
      throw InvalidArgument("[checkpoint] '" + key + "' is an undefined Variable");
  }
}

std::vector<std::pair<std::string, Variable>> Checkpoint::variables() const {
  std::vector<std::pair<std::string, Variable>> out;
  std::map<const VariableState*, std::string> path_of;  // for naming optimizer slots
  for (const auto& [key, object] : objects_) {
    if (const nn::Module* m = object.module()) {
      for (auto& [path, var] : m->named_variables()) out.emplace_back(key + "/" + path, var);
    } else if (const Variable* v = object.variable()) {
      out.emplace_back(key, *v);
    }
  }
  for (const auto& [path, var] : out) path_of.emplace(var.id(), path);
  for (const auto& [key, object] : objects_) {
    const optim::Optimizer* opt = object.optimizer();
    if (!opt) continue;
    out.emplace_back(key + "/iterations", opt->iterations_variable());
    for (const auto& s : opt->slot_variables()) {
      auto it = path_of.find(s.owner);
      if (it != path_of.end()) out.emplace_back(key + "/" + it->second + "/" + s.name, s.slot);
    }
  }
  std::map<std::string, const VariableState*> seen;
  for (const auto& [path, var] : out) {
    auto [it, fresh] = seen.emplace(path, var.id());
    if (!fresh && it->second != var.id())
      throw InvalidArgument("[checkpoint] two different variables have the path '" + path + "'");
  }
  return out;
}

void Checkpoint::save(const std::string& path, const std::map<std::string, std::string>& metadata) const {
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, var] : variables()) {
    // The state's value, not var.value(): no graph node, no tape, whatever scope is active.
    const Tensor& value = var.state()->value;
    if (!value.defined())
      throw FailedPrecondition("[checkpoint] variable '" + name + "' has no value yet (a Graph variable is "
                               "initialised by its Session's first run)");
    tensors.emplace(name, value);
  }
  std::map<std::string, std::string> meta = metadata;
  meta.emplace("format", "weft.checkpoint");
  save_tensors(path, tensors, meta);
}

RestoreReport Checkpoint::restore(const std::string& path, const RestoreOptions& options) const {
  Entries entries = load_tensors(path).tensors;
  RestoreReport report;

  // Plan everything and check it before changing a single variable: a failed restore leaves the
  // model as it was.
  struct Step {
    std::string path;
    Variable var;
    const Tensor* value;
  };
  std::vector<Step> steps;
  std::set<std::string> used;
  const auto current = variables();
  for (const auto& [p, var] : current) {
    auto it = entries.find(p);
    if (it == entries.end()) {
      report.missing.push_back(p);
      continue;
    }
    check_matches(path, p, it->second, var.dtype(), var.shape(), "the variable");
    steps.push_back({p, var, &it->second});
    used.insert(p);
  }
  // Slots the optimizer has not created yet, for variables that exist.
  struct SlotStep {
    optim::Optimizer opt;
    Variable var;
    std::string slot;
    const Tensor* value;
    std::string path;
  };
  std::vector<SlotStep> slot_steps;
  std::vector<std::pair<std::string, optim::Optimizer>> optimizers;
  for (const auto& [key, object] : objects_) {
    const optim::Optimizer* opt = object.optimizer();
    if (!opt) continue;
    optimizers.emplace_back(key, *opt);
    for (const auto& [p, var] : current) {
      if (starts_with(p, key + "/")) continue;  // the optimizer's own variables
      for (auto& [entry, slot] : slot_entries(entries, key, p)) {
        if (used.count(entry)) continue;
        check_matches(path, entry, entries.at(entry), var.dtype(), var.shape(), "the variable '" + p + "' it serves");
        slot_steps.push_back({*opt, var, slot, &entries.at(entry), entry});
        used.insert(entry);
      }
    }
  }
  if (!report.missing.empty() && !options.allow_missing) {
    std::string names;
    for (size_t i = 0; i < report.missing.size() && i < 10; ++i) names += (i ? ", '" : "'") + report.missing[i] + "'";
    if (report.missing.size() > 10) names += " and " + std::to_string(report.missing.size() - 10) + " more";
    throw NotFound("[checkpoint] " + path + " has no value for " + names +
                   " (RestoreOptions{.allow_missing = true} restores the rest)");
  }

  for (Step& s : steps) {
    s.var.restore(*s.value);
    report.restored.push_back(s.path);
  }
  for (SlotStep& s : slot_steps) {
    s.opt.restore_slot(s.var, s.slot, *s.value);
    report.restored.push_back(s.path);
  }

  // What is left waits for variables still to be built, under a module's or optimizer's key.
  Entries waiting;
  for (auto& [p, value] : entries) {
    if (used.count(p)) continue;
    bool owned = false;
    for (const auto& [key, object] : objects_)
      owned |= !object.variable() && starts_with(p, key + "/");
    (owned ? report.deferred : report.unused).push_back(p);
    if (owned) waiting.emplace(p, value);
  }
  auto pending = std::make_shared<PendingRestore>(path, std::move(waiting), std::move(optimizers));
  // Every module gets the new restore, even an empty one: it replaces any older pending restore.
  for (const auto& [key, object] : objects_)
    if (const nn::Module* m = object.module()) m->impl()->defer_restore(pending, key);
  return report;
}

}  // namespace weft
