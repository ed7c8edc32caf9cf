#include "api/nn/module.h"

#include <map>
#include <mutex>
#include <set>

#include "runtime/error.h"

namespace weft::nn {

namespace {
std::mutex g_names_mu;
std::map<std::string, int>& name_counts() {
  static auto* m = new std::map<std::string, int>();
  return *m;
}
}  // namespace

std::string unique_layer_name(const std::string& base) {
  std::lock_guard<std::mutex> lock(g_names_mu);
  int n = name_counts()[base]++;
  return n == 0 ? base : base + "_" + std::to_string(n);
}

void reset_layer_names() {
  std::lock_guard<std::mutex> lock(g_names_mu);
  name_counts().clear();
}

std::vector<Variable> ModuleImpl::variables() const {
  std::vector<Variable> out;
  for (const auto& [name, v] : own_) out.push_back(v);
  for (const auto& [name, m] : children_) {
    std::vector<Variable> sub = m.variables();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

NamedVariables ModuleImpl::named_variables() const {
  NamedVariables out;
  if (own_.empty() && children_.empty()) {
    // A module that keeps its variables itself (overriding variables() only): their own names,
    // numbered when they repeat.
    std::map<std::string, int> seen;
    for (const Variable& v : variables()) {
      int n = seen[v.name()]++;
      out.emplace_back(n == 0 ? v.name() : v.name() + "_" + std::to_string(n), v);
    }
    return out;
  }
  out = own_;
  for (const auto& [name, m] : children_)
    for (auto& [path, var] : m.named_variables()) out.emplace_back(name + "/" + path, var);
  return out;
}

void ModuleImpl::defer_restore(std::shared_ptr<VariableRestorer> restorer, const std::string& prefix) {
  for (const auto& [name, m] : children_) m.impl()->defer_restore(restorer, prefix + "/" + name);
  restorer_ = std::move(restorer);
  restore_prefix_ = prefix;
}

void ModuleImpl::check_new_name(const std::string& name, const char* what) const {
  const std::string where = "[" + name_ + "] " + what + " '" + name + "'";
  if (name.empty() || name.find('/') != std::string::npos)
    throw InvalidArgument(where + ": names must be non-empty and hold no '/' (it separates checkpoint paths)");
  for (const auto& [n, v] : own_)
    if (n == name) throw InvalidArgument(where + ": the name is taken by a registered variable");
  for (const auto& [n, m] : children_)
    if (n == name) throw InvalidArgument(where + ": the name is taken by a registered module");
}

Module ModuleImpl::register_module(const std::string& name, Module module) {
  if (!module.defined()) throw InvalidArgument("[" + name_ + "] register_module '" + name + "': empty module handle");
  if (module.impl() == this) throw InvalidArgument("[" + name_ + "] register_module '" + name + "': a module cannot hold itself");
  check_new_name(name, "register_module");
  children_.emplace_back(name, module);
  // A restore deferred before this registration reaches the new child too.
  if (restorer_) module.impl()->defer_restore(restorer_, restore_prefix_ + "/" + name);
  return module;
}

Variable ModuleImpl::register_variable(const std::string& name, Variable variable) {
  if (!variable.defined()) throw InvalidArgument("[" + name_ + "] register_variable '" + name + "': undefined Variable");
  check_new_name(name, "register_variable");
  own_.emplace_back(name, variable);
  // Built after a restore was deferred (a variable made on first call): it may be waiting.
  if (restorer_) variable_built(name, variable);
  return variable;
}

void ModuleImpl::variable_built(const std::string& relative_path, const Variable& var) {
  if (restorer_) restorer_->created(restore_prefix_ + "/" + relative_path, var);
}

std::vector<std::string> child_names(const std::vector<Module>& children) {
  std::map<std::string, int> counts;
  std::set<std::string> used;  // a kind may itself look numbered ("block_1")
  std::vector<std::string> out;
  for (const Module& m : children) {
    const std::string& kind = m.impl()->kind();
    std::string name;
    do {
      int n = counts[kind]++;
      name = n == 0 ? kind : kind + "_" + std::to_string(n);
    } while (!used.insert(name).second);
    out.push_back(name);
  }
  return out;
}

Tensor Module::operator()(const Tensor& x, bool training, const std::source_location& loc) const {
  if (!impl_) throw FailedPrecondition("[Module] call of an empty module handle");
  return impl_->call_at(x, training, loc);
}

std::vector<Variable> Module::variables() const { return impl_ ? impl_->variables() : std::vector<Variable>{}; }

std::vector<Variable> Module::trainable_variables() const {
  std::vector<Variable> out;
  for (const Variable& v : variables())
    if (v.trainable()) out.push_back(v);
  return out;
}

NamedVariables Module::named_variables() const { return impl_ ? impl_->named_variables() : NamedVariables{}; }

const std::string& Module::name() const {
  if (!impl_) throw FailedPrecondition("[Module] name of an empty module handle");
  return impl_->name();
}

}  // namespace weft::nn
