// Fuzz target for ClusterSpec::parse, which reads cluster specs from files and TF_CONFIG: any bytes
// must parse or raise InvalidArgument naming the source, never crash or hang. A spec that parses
// is consistent: at least one task, every task's name maps back to its rank, the declared task
// is one of them, and the process count check accepts exactly the number of tasks.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/cluster_spec.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<weft::ClusterSpec> spec;
  try {
    spec.emplace(weft::ClusterSpec::parse(text, "fuzz.json"));
  } catch (const weft::InvalidArgument& e) {
    if (std::string_view(e.what()).substr(0, 15) != "[cluster] fuzz.") std::abort();
    return 0;
  }
  const int n = spec->num_tasks();
  if (n < 1 || n > weft::ClusterSpec::kMaxTasks) std::abort();
  for (int r = 0; r < n; ++r)
    if (spec->rank_of(spec->task(r).name()) != r) std::abort();
  if (auto d = spec->declared_rank(); d && (*d < 0 || *d >= n)) std::abort();
  spec->check_process_count(n);
  try {
    spec->check_process_count(n + 1);
    std::abort();
  } catch (const weft::InvalidArgument&) {
  }
  return 0;
}
