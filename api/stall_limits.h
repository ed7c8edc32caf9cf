// The stall limits every Session and DataParallel starts from (SessionOptions::stall_warning_ms,
// stall_timeout_ms): WEFT_STALL_WARNING_MS and WEFT_STALL_TIMEOUT_MS when set, else 60 s and 10
// minutes (PyTorch's NCCL watchdog's default). A value that is not a whole number of milliseconds
// is reported on stderr and the default used; 0 turns the limit off.
#pragma once

#include <cstdint>

namespace weft {

int64_t default_stall_warning_ms();
int64_t default_stall_timeout_ms();

}  // namespace weft
