// One weft in a job. At start-up every task reports weft's version, its build identifier (a hash
// of the sources of weft's libraries, cmake/build_id.cmake) and a fingerprint of its op registry
// (OpRegistry::fingerprint: every op's signature and kernels, the built-in ones and the program's
// own). The chief compares each task's with its own, and a mismatch ends the job within the
// start-up bound, naming both on every task (cluster/startup.h). Two builds would otherwise agree
// on the control protocol yet differ in what a graph's ops do: a changed kernel, an op one side
// lacks, silently different numbers.
//
//   BuildIdentity mine = this_build();
//   std::string why = build_mismatch("/job:worker/replica:0/task:1", theirs, "the chief", mine);
#pragma once

#include <string>

namespace weft {

struct BuildIdentity {
  std::string version;   // weft's, "0.1.0"
  std::string build;     // 16 hex digits
  std::string registry;  // 16 hex digits

  // "weft 0.1.0, build 1a2b3c4d5e6f7081, op registry 0f1e2d3c4b5a6978"
  std::string to_string() const;
  bool operator==(const BuildIdentity&) const = default;
};

// This process's (registers the built-in ops first, so every process counts the same ones).
BuildIdentity this_build();

// Empty when the two are the same weft; otherwise a message naming both.
std::string build_mismatch(const std::string& task, const BuildIdentity& theirs, const std::string& chief,
                           const BuildIdentity& ours);

}  // namespace weft
