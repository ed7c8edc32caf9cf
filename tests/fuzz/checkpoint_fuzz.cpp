// Fuzz target for the safetensors reader (checkpoints, saved-model variables): any bytes must
// decode or raise a weft::Error, never crash, hang or over-allocate. What decodes must encode
// and decode again to the same tensors.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/safetensors.h"
#include "runtime/tensor_internals.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::TensorFile f;
  try {
    f = weft::decode_tensors(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const weft::Error&) {
    return 0;
  }
  const weft::TensorFile again = weft::decode_tensors(weft::encode_tensors(f.tensors, f.metadata), "re-encoded");
  if (again.metadata != f.metadata || again.tensors.size() != f.tensors.size()) std::abort();
  for (const auto& [name, t] : f.tensors) {
    const weft::Tensor& u = again.tensors.at(name);
    if (u.dtype() != t.dtype() || u.shape() != t.shape() ||
        (t.nbytes() && std::memcmp(raw_data(u), raw_data(t), t.nbytes()) != 0))
      std::abort();
  }
  return 0;
}
