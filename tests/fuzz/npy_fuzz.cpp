// Fuzz target for the .npy reader: any bytes must decode or raise a weft::Error, never crash,
// hang or over-allocate. What decodes must also survive a round trip: encoding it and decoding
// that gives the same bytes again.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtime/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::Tensor t;
  try {
    t = weft::decode_npy(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const weft::Error&) {
    return 0;
  }
  const std::string once = weft::encode_npy(t);
  if (weft::encode_npy(weft::decode_npy(once, "re-encoded")) != once) std::abort();
  return 0;
}
