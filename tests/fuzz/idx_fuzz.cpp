// Fuzz target for the IDX reader (runtime/idx.h), plain and gzip: any file must load or raise
// DataLoss or InvalidArgument naming it, never crash, hang, or allocate what its header claims
// beyond what the file holds. The bytes go into an in-memory file (memfd), read by its path.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/error.h"
#include "runtime/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A small limit: a gzip input that really inflates to gigabytes is refused, not allocated.
  static const bool limited = ::setenv("WEFT_IDX_MAX_BYTES", "16777216", 1) == 0;
  if (!limited) std::abort();
  const int fd = ::memfd_create("idx_fuzz", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  for (size_t done = 0; done < size;) {
    const ssize_t w = ::write(fd, data + done, size - done);
    if (w <= 0) std::abort();
    done += static_cast<size_t>(w);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    const weft::ArrayHeader h = weft::read_idx_header(path);
    const weft::Tensor t = weft::read_idx(path);
    if (t.dtype() != h.dtype || t.shape() != h.shape) std::abort();
  } catch (const weft::DataLoss& e) {
    if (std::string(e.what()).find(path) == std::string::npos) std::abort();
  } catch (const weft::InvalidArgument& e) {
    if (std::string(e.what()).find(path) == std::string::npos) std::abort();
  }
  ::close(fd);
  return 0;
}
