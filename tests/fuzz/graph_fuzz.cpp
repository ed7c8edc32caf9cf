// Fuzz target for the graph file reader: any bytes must decode to a validated graph or raise a
// weft::Error, never crash, hang or over-allocate.
#include <cstdint>
#include <string_view>

#include "kernels/register_all.h"
#include "runtime/graph_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The registry must know every op before a graph can name one; filled once per process.
  static const bool registered = (weft::register_builtin_ops(), true);
  (void)registered;
  try {
    weft::GraphIR g = weft::decode_graph(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    (void)g.topological_order();
  } catch (const weft::Error&) {
  }
  return 0;
}
