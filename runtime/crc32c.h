// CRC32C (Castagnoli polynomial, reflected, as in iSCSI, ext4 and LevelDB): the checksum weft
// stores for every tensor of a safetensors file.
//
//   uint32_t c = crc32c(data, n);              // crc32c("123456789") == 0xE3069283
//   c = crc32c_extend(c, more, m);             // the same as one call over data + more
//
// The SSE4.2 instruction is used where the CPU has it (found at run time, so one binary runs
// everywhere); otherwise a table-driven version that reads eight bytes at a time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft {

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }

// The portable version alone, so tests can check both against each other.
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n);

}  // namespace weft
