#include "runtime/duration_setting.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace weft {

std::chrono::milliseconds milliseconds_setting(const char* name, const char* text, std::chrono::milliseconds fallback,
                                               bool allow_zero) {
  if (!text || !*text) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long ms = std::strtoll(text, &end, 10);
  if (*end != '\0' || errno == ERANGE || ms < 0 || (ms == 0 && !allow_zero)) {
    std::fprintf(stderr, "weft: %s='%s' is not a %s whole number of milliseconds; using %lld\n", name, text,
                 allow_zero ? "non-negative" : "positive", static_cast<long long>(fallback.count()));
    return fallback;
  }
  return std::chrono::milliseconds(ms);
}

}  // namespace weft
