// The control messages (cluster/proto/control.capnp) as plain values, and errors across
// processes: a weft::Error travels as (code, message) and is raised again on the chief as the
// same class, its message naming the task it came from.
//
//   ControlRequest r = decode_request(words);     // InvalidArgument for damaged messages
//   switch (r.kind) { case ControlRequest::Kind::kRunStep: run(r.handle, r.step_id); ... }
//
// Messages are untrusted: decoding bounds Cap'n Proto's traversal by the message's size, checks
// every field it reads (a partition's bytes are checked later, as a graph file, when decoded),
// and turns any malformed message into InvalidArgument. A fuzz target covers both decoders.
#pragma once

#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include <capnp/common.h>

#include "cluster/flight_record.h"
#include "cluster/proto/control.capnp.h"
#include "scheduler/step_rendezvous.h"
#include "runtime/timeline.h"

namespace weft {

// A step as a task forwards it down the step's tree (cluster/step_tree.h): the task it goes to,
// the chief's small sends to that task, and the tasks that one forwards it to in turn.
struct ForwardedStep {
  int rank = -1;
  std::vector<StepTensor> tensors;
  std::vector<ForwardedStep> subtree;
};

// One task's answer to a step, as carried up the step's tree.
struct StepAnswer {
  int rank = -1;
  std::exception_ptr error;  // null on success
  std::vector<StepTensor> tensors;  // the task's small sends to the chief
};

struct ControlReply {
  proto::Reply::Kind kind = proto::Reply::Kind::PING;
  int64_t step_id = 0;
  uint64_t handle = 0;
  std::exception_ptr error;  // null on success
  std::vector<timeline::Event> timeline;  // kind TIMELINE: the task's events, on its own clock
  int64_t task_time_us = 0;               // kind TIMELINE: the task's clock on receipt
  std::vector<StepTensor> tensors;        // kind RUN_STEP: the task's small sends to the chief
  std::vector<StepAnswer> gathered;       // kind RUN_STEP: the answers of the sender's subtree
  int signal = 0;                         // kind SIGNAL: SIGTERM or SIGINT
  std::string report;                     // kind STALL_REPORT: a line per thing running or waiting
  bool in_collective = false;             // kind STALL_REPORT
  std::vector<FlightRecordEntry> flight;  // kind FLIGHT_RECORD: the task's entries, on its own clock (task_time_us set)
  uint64_t flight_recorded = 0;           // kind FLIGHT_RECORD
};

struct ControlRequest {
  enum class Kind {
    kRegister, kRunStep, kAbortStep, kRelease, kEndSession, kShutdown, kPing, kResetCollectives, kTimelineControl,
    kStepDone, kEndJob, kStallReport, kFlightRecord
  };
  Kind kind = Kind::kPing;
  uint64_t session = 0;                 // kRegister, kEndSession
  uint64_t handle = 0;                  // kRegister, kRunStep, kRelease; kTimelineControl, kFlightRecord: its id
  int64_t step_id = 0;                  // kRunStep, kAbortStep, kStepDone, kStallReport, kFlightRecord
  std::vector<std::string> partitions;  // kRegister: graph files
  std::vector<std::string> reply_edges; // kRegister: edges whose small tensors go back in the Reply
  std::vector<StepTensor> tensors;      // kRunStep: the chief's small sends to this task
  std::vector<ForwardedStep> subtree;   // kRunStep: the tasks this one forwards the step to
  ControlReply step_done;               // kStepDone: a task's answer for its subtree (kind RUN_STEP)
  std::exception_ptr error;             // kAbortStep: the error to abort with
  bool timeline_enable = false;         // kTimelineControl
  bool timeline_collect = false;        // kTimelineControl
  int64_t chief_time_us = 0;            // kTimelineControl
  int signal = 0;                       // kEndJob: SIGTERM or SIGINT
};


// A tensor of a step's message (scheduler/step_rendezvous.h). Reading checks the key (as
// RendezvousKey::parse does), the dtype, the shape against the bytes, and the size against
// kMaxStepMessageTensorBytes: InvalidArgument naming `sender` and what is wrong.
void write_step_tensor(const StepTensor& t, proto::StepTensor::Builder out);
// Each of `tensors` into `out`, a list of their size (initTensors(tensors.size())).
void write_step_tensors(std::span<const StepTensor> tensors, capnp::List<proto::StepTensor>::Builder out);
StepTensor read_step_tensor(proto::StepTensor::Reader in, const std::string& sender);

// A RunStep for `to` (its tensors and subtree), as the chief and forwarding tasks send it.
void write_run_step(uint64_t handle, int64_t step_id, const ForwardedStep& to, proto::RunStep::Builder out);
// A step's answer for `own` and the answers gathered from its subtree, as sent up the tree.
void write_step_answer(int64_t step_id, const StepAnswer& own, std::span<const StepAnswer> gathered,
                       proto::Reply::Builder out);
// The answers a RUN_STEP reply from `source` carries: its own first, then its subtree's.
std::vector<StepAnswer> step_answers(int source, ControlReply&& reply);

// A FLIGHT_RECORD reply's entries (`entries` of this process's recorder, taken now).
void write_flight_entries(std::span<const FlightEntry> entries, proto::Reply::Builder out);

// InvalidArgument naming `sender` for a message that is damaged or out of bounds.
ControlRequest decode_request(std::span<const capnp::word> words, const std::string& sender);
// `task` names the sender in the error an answer carries.
ControlReply decode_reply(std::span<const capnp::word> words, const std::string& task);

// Writes the error held by `error` (a weft::Error, or anything else as Internal).
void error_to_proto(const std::exception_ptr& error, proto::ErrorInfo::Builder out);
// The error as its own class; its message starts with "[task NAME] " unless it names the task
// already. An unknown code (a damaged or newer message) is Internal.
std::exception_ptr error_from_proto(proto::ErrorInfo::Reader in, const std::string& task);
// Prefixes the message of `error` with "[task NAME] ", keeping its class.
std::exception_ptr error_at_task(const std::exception_ptr& error, const std::string& task);

}  // namespace weft
