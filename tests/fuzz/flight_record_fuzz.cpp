// Fuzz target for flight record files (cluster/flight_record.h), which weft-inspect reads: any
// bytes must parse or raise InvalidArgument starting "[flight record] ", never crash or hang, and
// a record that parses must print as a table (whatever its times: they may be extreme).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cluster/flight_record.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const weft::FlightRecord record = weft::flight_record_from_json(text);
    for (const weft::TaskFlightRecord& t : record.tasks)
      for (const weft::FlightRecordEntry& e : t.entries)
        if (e.kind.size() > weft::kMaxFlightKindLength) std::abort();
    if (weft::format_flight_record(record).empty()) std::abort();
  } catch (const weft::InvalidArgument& e) {
    if (std::string_view(e.what()).substr(0, 16) != "[flight record] ") std::abort();
  }
  return 0;
}
