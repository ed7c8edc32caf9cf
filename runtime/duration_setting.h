// A duration a process reads from its environment (WEFT_STARTUP_TIMEOUT_MS,
// WEFT_LIVENESS_TIMEOUT_MS): a positive whole number of milliseconds. Every task reads it
// before anything can be raised across the cluster, so a malformed value is reported on stderr,
// naming the variable and the value, and the fallback is used.
//
//   milliseconds_setting("WEFT_STARTUP_TIMEOUT_MS", std::getenv("WEFT_STARTUP_TIMEOUT_MS"), 30s);
#pragma once

#include <chrono>

namespace weft {

// `text` is the variable's value, null when unset; unset or empty gives `fallback` silently.
// `allow_zero`: 0 is a value (it turns something off) rather than a mistake.
std::chrono::milliseconds milliseconds_setting(const char* name, const char* text, std::chrono::milliseconds fallback,
                                               bool allow_zero = false);

}  // namespace weft
