// Fuzz target for the cluster's control messages (cluster/messages.h): any bytes, read as a
// request (as a task reads the chief's) and as a reply (as the chief reads a task's), must decode
// or raise InvalidArgument naming the sender, never crash, hang or allocate without bound.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "cluster/messages.h"
#include "runtime/error.h"
#include "runtime/timeline_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Messages arrive as whole words; the transport refuses anything else before decoding.
  std::vector<capnp::word> words(size / sizeof(capnp::word));
  if (!words.empty()) std::memcpy(words.data(), data, words.size() * sizeof(capnp::word));
  auto expect_named = [](const weft::InvalidArgument& e, std::string_view sender) {
    const std::string_view what = e.what();
    if (what.find("[cluster] damaged control message from") != 0 && what.find(sender) == std::string_view::npos)
      std::abort();
  };
  try {
    const weft::ControlRequest r = weft::decode_request(words, "the chief");
    if (r.kind == weft::ControlRequest::Kind::kRunStep && r.step_id < 0) std::abort();
    for (const weft::StepTensor& t : r.tensors)
      if (t.key.step_id != r.step_id || t.value.nbytes() > weft::kMaxStepMessageTensorBytes) std::abort();
    if (r.kind == weft::ControlRequest::Kind::kRegister && r.partitions.empty()) std::abort();
  } catch (const weft::InvalidArgument& e) {
    expect_named(e, "the chief");
  }
  try {
    const weft::ControlReply r = weft::decode_reply(words, "/job:worker/replica:0/task:1");
    for (const weft::timeline::Event& e : r.timeline)
      if (e.duration_us < 0 || e.name.size() > weft::timeline::kMaxStringBytes) std::abort();
    for (const weft::FlightRecordEntry& e : r.flight)
      if (e.kind.size() > weft::kMaxFlightKindLength || e.state.empty()) std::abort();
    if (r.error) {
      try {
        std::rethrow_exception(r.error);
      } catch (const weft::Error& e) {
        if (std::string_view(e.what()).find("/job:worker/replica:0/task:1") == std::string_view::npos) std::abort();
      }
    }
  } catch (const weft::InvalidArgument& e) {
    expect_named(e, "/job:worker/replica:0/task:1");
  }
  return 0;
}
