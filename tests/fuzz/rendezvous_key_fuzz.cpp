// Fuzz target for RendezvousKey::parse, which reads keys that other processes send: any bytes
// must parse or raise InvalidArgument, never crash or hang. A key that parses is canonical:
// printing it gives back the same bytes.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtime/error.h"
#include "runtime/rendezvous.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  weft::RendezvousKey key;
  try {
    key = weft::RendezvousKey::parse(text);
  } catch (const weft::InvalidArgument&) {
    return 0;
  }
  if (key.to_string() != text) std::abort();
  return 0;
}
