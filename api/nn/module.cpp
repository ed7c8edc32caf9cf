#include "api/nn/module.h"

#include <map>
#include <mutex>

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

Tensor Module::operator()(const Tensor& x, bool training) const {
  if (!impl_) throw FailedPrecondition("[Module] call of an empty module handle");
  return impl_->call(x, training);
}

std::vector<Variable> Module::variables() const { return impl_ ? impl_->variables() : std::vector<Variable>{}; }

std::vector<Variable> Module::trainable_variables() const {
  std::vector<Variable> out;
  for (const Variable& v : variables())
    if (v.trainable()) out.push_back(v);
  return out;
}

const std::string& Module::name() const {
  if (!impl_) throw FailedPrecondition("[Module] name of an empty module handle");
  return impl_->name();
}

}  // namespace weft::nn
