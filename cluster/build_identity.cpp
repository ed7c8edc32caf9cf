#include "cluster/build_identity.h"

#include <cstdio>

#include "kernels/register_all.h"
#include "runtime/op_registry.h"
#include "weft_build_id.h"

namespace weft {

std::string BuildIdentity::to_string() const {
  return "weft " + version + ", build " + build + ", op registry " + registry;
}

BuildIdentity this_build() {
  register_builtin_ops();
  char registry[17];
  std::snprintf(registry, sizeof registry, "%016llx", static_cast<unsigned long long>(op_registry().fingerprint()));
  return {WEFT_VERSION, WEFT_BUILD_ID, registry};
}

std::string build_mismatch(const std::string& task, const BuildIdentity& theirs, const std::string& chief,
                           const BuildIdentity& ours) {
  if (theirs == ours) return "";
  std::string what = theirs.version != ours.version ? "another version of weft"
                     : theirs.build != ours.build   ? "another build of weft"
                                                    : "weft with other ops registered";
  return "[cluster] " + task + " runs " + what + " than " + chief + ": " + task + " has " + theirs.to_string() +
         "; " + chief + " has " + ours.to_string() + ". Every task of a job must run the same build";
}

}  // namespace weft
