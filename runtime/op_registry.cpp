#include "runtime/op_registry.h"

#include <algorithm>

namespace weft {

void InferContext::set_num_outputs(int n) {
  num_outputs_ = n;
  if (n > kInline) more_.resize(n - kInline);
}

void InferContext::set_output(int i, DType dtype, Shape shape) {
  TensorMeta& m = i < kInline ? inline_[i] : more_[i - kInline];
  m.dtype = dtype;
  m.shape = std::move(shape);
}

void InferContext::fail(const std::string& message) const {
  throw InvalidArgument("[" + op_.display + "] " + message);
}

Cost OpDef::estimate_cost(const InferContext& ctx) const {
  if (cost) return cost(ctx);
  Cost c;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    int64_t n = ctx.input_shape(i).num_elements();
    if (n > 0) c.bytes += static_cast<double>(n) * dtype_size(ctx.input_dtype(i));
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    int64_t n = ctx.output(i).shape.num_elements();
    if (n > 0) {
      c.bytes += static_cast<double>(n) * dtype_size(ctx.output(i).dtype);
      c.flops += static_cast<double>(n);
    }
  }
  return c;
}

OpDef& OpRegistry::add(OpDef def) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const OpDef& d : defs_)
    if (d.name == def.name) throw InvalidArgument("[op_registry] op '" + def.name + "' registered twice");
  if (def.display.empty()) def.display = def.name;
  defs_.push_back(std::move(def));
  return defs_.back();
}

const OpDef* OpRegistry::find(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const OpDef& d : defs_)
    if (d.name == name) return &d;
  return nullptr;
}

namespace {
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

const OpDef& OpRegistry::get(std::string_view name) const {
  if (const OpDef* d = find(name)) return *d;
  std::vector<std::pair<size_t, std::string>> near;
  for (const OpDef* d : all()) near.emplace_back(edit_distance(name, d->name), d->name);
  std::sort(near.begin(), near.end());
  std::string msg = "[op_registry] no op named '" + std::string(name) + "'";
  if (!near.empty() && near.front().first <= 3) msg += "; did you mean '" + near.front().second + "'?";
  throw NotFound(msg);
}

uint64_t OpRegistry::fingerprint() const {
  std::vector<std::string> signatures;
  for (const OpDef* d : all()) {
    std::string s = d->name + "|" + std::to_string(d->min_inputs) + "|" + std::to_string(d->max_inputs) + "|" +
                    std::to_string(d->num_outputs) + "|" + std::to_string(d->flags) + "|" +
                    std::to_string(d->kernel_dtype_input);
    for (const AttrSpec& a : d->attrs)
      s += "|" + a.name + ":" + std::to_string(static_cast<int>(a.type)) + (a.required ? "!" : "?");
    s += "|";
    for (int dev = 0; dev < kNumDeviceTypes; ++dev)
      for (int t = 0; t < kNumDTypes; ++t)
        s += d->kernels[dev][t] ? (d->async_kernels[dev][t] ? 'b' : 'k') : (d->async_kernels[dev][t] ? 'a' : '.');
    signatures.push_back(std::move(s));
  }
  std::sort(signatures.begin(), signatures.end());
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (const std::string& s : signatures)
    for (char c : s + "\n") h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

OpDef& OpRegistry::mutable_get(std::string_view name) { return const_cast<OpDef&>(get(name)); }

std::vector<const OpDef*> OpRegistry::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const OpDef*> out;
  for (const OpDef& d : defs_) out.push_back(&d);
  return out;
}

OpRegistry& op_registry() {
  static auto* r = new OpRegistry();
  return *r;
}

}  // namespace weft
