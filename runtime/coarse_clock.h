// A clock that costs one relaxed load to read: milliseconds of the steady clock, advanced every
// 100 ms by a thread of its own (started on first use, stopped at exit). For when a kernel or a
// transfer started, which stall reports print (cluster/stall_report.h), on paths where even a
// steady_clock read per kernel would show.
//
//   const int64_t started = coarse_now_ms();
//   ... later, on another thread: coarse_now_ms() - started   // within 100 ms
#pragma once

#include <cstdint>

namespace weft {

int64_t coarse_now_ms();

}  // namespace weft
