#include "cluster/messages.h"

#include <algorithm>
#include <csignal>

#include <capnp/serialize.h>

#include "cluster/step_tree.h"
#include "runtime/error.h"
#include "runtime/tensor_internals.h"
#include "runtime/timeline_format.h"

namespace weft {

namespace {

// Bounds one message's traversal by its own size, like graph files: a message cannot make its
// reader walk more than a few times its bytes, nor nest deeper than the protocol does.
capnp::ReaderOptions bounded(std::span<const capnp::word> words) {
  return {.traversalLimitInWords = 4 * words.size() + 1024, .nestingLimit = 16 + 2 * kMaxStepTreeDepth};
}

constexpr size_t kMaxPartitions = 1 << 16;
constexpr size_t kMaxStepTensors = 1 << 16;
constexpr size_t kMaxReplyEdges = 1 << 20;
constexpr unsigned kMaxRank = 64;
constexpr int kMaxTaskRank = 1 << 24;

[[noreturn]] void damaged(const std::string& sender, const std::string& why) {
  throw InvalidArgument("[cluster] damaged control message from " + sender + ": " + why);
}

ControlReply read_reply(proto::Reply::Reader r, const std::string& task);

}  // namespace

namespace {

bool known_code(uint32_t code) {
  switch (static_cast<ErrorCode>(code)) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kDeadlineExceeded:
    case ErrorCode::kNotFound:
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kOutOfRange:
    case ErrorCode::kUnimplemented:
    case ErrorCode::kInternal:
    case ErrorCode::kUnavailable:
    case ErrorCode::kDataLoss:
      return true;
  }
  return false;
}

std::exception_ptr make_error(ErrorCode code, const std::string& message) {
  try {
    throw_error(code, message);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

void error_to_proto(const std::exception_ptr& error, proto::ErrorInfo::Builder out) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    out.setCode(static_cast<uint32_t>(e.code()));
    out.setMessage(e.what());
  } catch (const std::exception& e) {
    out.setCode(static_cast<uint32_t>(ErrorCode::kInternal));
    out.setMessage(e.what());
  } catch (...) {
    out.setCode(static_cast<uint32_t>(ErrorCode::kInternal));
    out.setMessage("an exception that is not a std::exception");
  }
}

namespace {

// The error as its own class; `task`, when not empty, is named unless the message names it.
std::exception_ptr error_from_proto_naming(proto::ErrorInfo::Reader in, const std::string& task) {
  std::string message = in.hasMessage() ? std::string(in.getMessage().cStr()) : std::string("(no message)");
  if (message.size() > 65536) message = message.substr(0, 65536) + "...";
  if (!task.empty() && message.find(task) == std::string::npos) message = "[task " + task + "] " + message;
  if (!known_code(in.getCode()))
    return make_error(ErrorCode::kInternal, message + " (unknown error code " + std::to_string(in.getCode()) + ")");
  return make_error(static_cast<ErrorCode>(in.getCode()), message);
}

}  // namespace

std::exception_ptr error_from_proto(proto::ErrorInfo::Reader in, const std::string& task) {
  return error_from_proto_naming(in, task);
}

std::exception_ptr error_at_task(const std::exception_ptr& error, const std::string& task) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    const std::string what = e.what();
    return what.find("[task " + task + "]") == 0 ? error : make_error(e.code(), "[task " + task + "] " + what);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kInternal, "[task " + task + "] " + e.what());
  } catch (...) {
    return make_error(ErrorCode::kInternal, "[task " + task + "] unknown exception");
  }
}

void write_step_tensor(const StepTensor& t, proto::StepTensor::Builder out) {
  out.setKey(t.key.to_string());
  out.setIsDead(t.is_dead);
  if (!t.value.defined()) return;
  out.setHasValue(true);
  out.setDtype(static_cast<uint32_t>(t.value.dtype()));
  const Shape& shape = t.value.shape();
  auto dims = out.initShape(static_cast<unsigned>(shape.rank()));
  for (int i = 0; i < shape.rank(); ++i) dims.set(static_cast<unsigned>(i), shape[i]);
  out.setData(capnp::Data::Reader(static_cast<const kj::byte*>(raw_data(t.value)), t.value.nbytes()));
}

StepTensor read_step_tensor(proto::StepTensor::Reader in, const std::string& sender) {
  StepTensor t;
  try {
    t.key = RendezvousKey::parse(in.hasKey() ? std::string_view(in.getKey().cStr(), in.getKey().size()) : std::string_view());
  } catch (const InvalidArgument& e) {
    damaged(sender, std::string("a step tensor's key: ") + e.what());
  }
  t.is_dead = in.getIsDead();
  if (!in.getHasValue()) return t;
  const std::string what = "the step tensor of key " + t.key.to_string();
  if (in.getDtype() >= static_cast<uint32_t>(kNumDTypes))
    damaged(sender, what + " has dtype code " + std::to_string(in.getDtype()) + ", which is not one");
  const auto dtype = static_cast<DType>(in.getDtype());
  const auto dims = in.getShape();
  if (dims.size() > kMaxRank) damaged(sender, what + " has rank " + std::to_string(dims.size()));
  std::vector<int64_t> shape;
  size_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0 || static_cast<uint64_t>(d) > kMaxStepMessageTensorBytes)
      damaged(sender, what + " has dimension " + std::to_string(d));
    elements *= static_cast<size_t>(d);
    if (elements > kMaxStepMessageTensorBytes) damaged(sender, what + " is larger than a step message carries");
    shape.push_back(d);
  }
  const capnp::Data::Reader data = in.getData();
  if (data.size() != elements * dtype_size(dtype))
    damaged(sender, what + " has " + std::to_string(data.size()) + " bytes of data for " + std::to_string(elements) +
                        " elements of " + std::string(dtype_name(dtype)));
  t.value = Tensor::from_host(dtype, Shape(shape), data.begin());
  return t;
}

void write_step_tensors(std::span<const StepTensor> tensors, capnp::List<proto::StepTensor>::Builder out) {
  for (size_t i = 0; i < tensors.size(); ++i) write_step_tensor(tensors[i], out[static_cast<unsigned>(i)]);
}

namespace {

// A step message's tensors, each of which must belong to the message's step.
void read_step_tensors(capnp::List<proto::StepTensor>::Reader list, int64_t step_id, const std::string& sender,
                       std::vector<StepTensor>& out) {
  if (list.size() > kMaxStepTensors) damaged(sender, std::to_string(list.size()) + " step tensors");
  for (proto::StepTensor::Reader t : list) {
    out.push_back(read_step_tensor(t, sender));
    if (out.back().key.step_id != step_id)
      damaged(sender, "step " + std::to_string(step_id) + " carries a tensor of step " +
                          std::to_string(out.back().key.step_id));
  }
}

void write_forwarded_steps(std::span<const ForwardedStep> steps, capnp::List<proto::ForwardedStep>::Builder out) {
  for (size_t i = 0; i < steps.size(); ++i) {
    proto::ForwardedStep::Builder b = out[static_cast<unsigned>(i)];
    b.setRank(steps[i].rank);
    if (!steps[i].tensors.empty())
      write_step_tensors(steps[i].tensors, b.initTensors(static_cast<unsigned>(steps[i].tensors.size())));
    if (!steps[i].subtree.empty())
      write_forwarded_steps(steps[i].subtree, b.initSubtree(static_cast<unsigned>(steps[i].subtree.size())));
  }
}

void read_forwarded_steps(capnp::List<proto::ForwardedStep>::Reader list, int64_t step_id, const std::string& sender,
                          int depth, std::vector<ForwardedStep>& out) {
  if (depth > kMaxStepTreeDepth) damaged(sender, "a step's tree deeper than " + std::to_string(kMaxStepTreeDepth));
  for (proto::ForwardedStep::Reader in : list) {
    ForwardedStep& f = out.emplace_back();
    f.rank = in.getRank();
    if (f.rank < 0 || f.rank >= kMaxTaskRank) damaged(sender, "a step forwarded to rank " + std::to_string(f.rank));
    read_step_tensors(in.getTensors(), step_id, sender, f.tensors);
    read_forwarded_steps(in.getSubtree(), step_id, sender, depth + 1, f.subtree);
  }
}

void write_error_if_any(const std::exception_ptr& error, proto::Reply::Builder out) {
  if (!error) return;
  out.setHasError(true);
  error_to_proto(error, out.initError());
}

void read_gathered(capnp::List<proto::GatheredAnswer>::Reader list, int64_t step_id, const std::string& sender,
                   std::vector<StepAnswer>& out) {
  if (list.size() > static_cast<unsigned>(kMaxTaskRank)) damaged(sender, std::to_string(list.size()) + " gathered answers");
  for (proto::GatheredAnswer::Reader in : list) {
    StepAnswer& a = out.emplace_back();
    a.rank = in.getRank();
    if (a.rank < 0 || a.rank >= kMaxTaskRank) damaged(sender, "an answer of rank " + std::to_string(a.rank));
    // The error was named by the task it happened on (error_at_task) before it came up the tree.
    if (in.getHasError()) a.error = error_from_proto_naming(in.getError(), "");
    read_step_tensors(in.getTensors(), step_id, sender, a.tensors);
  }
}

// The only signals a job ends by (cluster/job_signals.h).
void check_stop_signal(int signo, const std::string& sender) {
  if (signo != SIGTERM && signo != SIGINT) damaged(sender, "signal " + std::to_string(signo) + ", not SIGTERM or SIGINT");
}

}  // namespace

void write_run_step(uint64_t handle, int64_t step_id, const ForwardedStep& to, proto::RunStep::Builder out) {
  out.setHandle(handle);
  out.setStepId(step_id);
  if (!to.tensors.empty()) write_step_tensors(to.tensors, out.initTensors(static_cast<unsigned>(to.tensors.size())));
  if (!to.subtree.empty()) write_forwarded_steps(to.subtree, out.initSubtree(static_cast<unsigned>(to.subtree.size())));
}

void write_step_answer(int64_t step_id, const StepAnswer& own, std::span<const StepAnswer> gathered,
                       proto::Reply::Builder out) {
  out.setKind(proto::Reply::Kind::RUN_STEP);
  out.setStepId(step_id);
  write_error_if_any(own.error, out);
  if (!own.error && !own.tensors.empty())
    write_step_tensors(own.tensors, out.initTensors(static_cast<unsigned>(own.tensors.size())));
  if (gathered.empty()) return;
  auto list = out.initGathered(static_cast<unsigned>(gathered.size()));
  for (size_t i = 0; i < gathered.size(); ++i) {
    proto::GatheredAnswer::Builder b = list[static_cast<unsigned>(i)];
    const StepAnswer& a = gathered[i];
    b.setRank(a.rank);
    if (a.error) {
      b.setHasError(true);
      error_to_proto(a.error, b.initError());
    } else if (!a.tensors.empty()) {
      write_step_tensors(a.tensors, b.initTensors(static_cast<unsigned>(a.tensors.size())));
    }
  }
}

std::vector<StepAnswer> step_answers(int source, ControlReply&& reply) {
  std::vector<StepAnswer> out;
  out.reserve(1 + reply.gathered.size());
  out.push_back({source, std::move(reply.error), std::move(reply.tensors)});
  for (StepAnswer& a : reply.gathered) out.push_back(std::move(a));
  return out;
}

ControlRequest decode_request(std::span<const capnp::word> words, const std::string& sender) {
  if (words.empty()) damaged(sender, "empty");
  try {
    capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()), bounded(words));
    const proto::Request::Reader r = reader.getRoot<proto::Request>();
    ControlRequest out;
    switch (r.which()) {
      case proto::Request::REGISTER: {
        const auto reg = r.getRegister();
        out.kind = ControlRequest::Kind::kRegister;
        out.session = reg.getSession();
        out.handle = reg.getHandle();
        const auto parts = reg.getPartitions();
        if (parts.size() == 0 || parts.size() > kMaxPartitions)
          damaged(sender, "a graph registered with " + std::to_string(parts.size()) + " partitions");
        for (capnp::Data::Reader d : parts) out.partitions.emplace_back(reinterpret_cast<const char*>(d.begin()), d.size());
        const auto edges = reg.getReplyEdges();
        if (edges.size() > kMaxReplyEdges) damaged(sender, std::to_string(edges.size()) + " reply edges");
        for (capnp::Text::Reader e : edges) out.reply_edges.emplace_back(e.cStr(), e.size());
        return out;
      }
      case proto::Request::RUN_STEP:
        out.kind = ControlRequest::Kind::kRunStep;
        out.handle = r.getRunStep().getHandle();
        out.step_id = r.getRunStep().getStepId();
        if (out.step_id < 0) damaged(sender, "negative step id " + std::to_string(out.step_id));
        read_step_tensors(r.getRunStep().getTensors(), out.step_id, sender, out.tensors);
        read_forwarded_steps(r.getRunStep().getSubtree(), out.step_id, sender, 1, out.subtree);
        return out;
      case proto::Request::ABORT_STEP:
        out.kind = ControlRequest::Kind::kAbortStep;
        out.step_id = r.getAbortStep().getStepId();
        out.error = error_from_proto(r.getAbortStep().getError(), sender);
        return out;
      case proto::Request::RELEASE:
        out.kind = ControlRequest::Kind::kRelease;
        out.handle = r.getRelease().getHandle();
        return out;
      case proto::Request::END_SESSION:
        out.kind = ControlRequest::Kind::kEndSession;
        out.session = r.getEndSession();
        return out;
      case proto::Request::SHUTDOWN:
        out.kind = ControlRequest::Kind::kShutdown;
        return out;
      case proto::Request::RESET_COLLECTIVES:
        out.kind = ControlRequest::Kind::kResetCollectives;
        return out;
      case proto::Request::PING:
        out.kind = ControlRequest::Kind::kPing;
        return out;
      case proto::Request::TIMELINE_CONTROL: {
        const auto t = r.getTimelineControl();
        out.kind = ControlRequest::Kind::kTimelineControl;
        out.handle = t.getId();
        out.timeline_enable = t.getEnable();
        out.timeline_collect = t.getCollect();
        out.chief_time_us = t.getChiefTime();
        return out;
      }
      case proto::Request::STALL_REPORT:
        out.kind = ControlRequest::Kind::kStallReport;
        out.step_id = r.getStallReport();
        return out;
      case proto::Request::FLIGHT_RECORD:
        out.kind = ControlRequest::Kind::kFlightRecord;
        out.handle = r.getFlightRecord().getId();
        out.step_id = r.getFlightRecord().getStepId();
        return out;
      case proto::Request::STEP_DONE:
        out.kind = ControlRequest::Kind::kStepDone;
        out.step_done = read_reply(r.getStepDone(), sender);
        if (out.step_done.kind != proto::Reply::Kind::RUN_STEP) damaged(sender, "a step's answer of another kind");
        out.step_id = out.step_done.step_id;
        return out;
      case proto::Request::END_JOB:
        out.kind = ControlRequest::Kind::kEndJob;
        out.signal = r.getEndJob();
        check_stop_signal(out.signal, sender);
        return out;
    }
    damaged(sender, "a request of unknown kind " + std::to_string(static_cast<int>(r.which())));
  } catch (const kj::Exception& e) {
    damaged(sender, e.getDescription().cStr());
  }
}

namespace {

void read_flight_entries(capnp::List<proto::FlightEntry>::Reader list, const std::string& task,
                         std::vector<FlightRecordEntry>& out) {
  if (list.size() > kMaxFlightRecorderEntries) damaged(task, std::to_string(list.size()) + " flight recorder entries");
  out.reserve(list.size());
  for (proto::FlightEntry::Reader e : list) {
    if (e.getKind().size() > kMaxFlightKindLength) damaged(task, "a flight recorder entry's kind longer than 64 bytes");
    if (e.getState() > static_cast<uint8_t>(FlightState::kCancelled))
      damaged(task, "a flight recorder entry of unknown state " + std::to_string(e.getState()));
    out.push_back({e.getSeq(), std::string(e.getKind().cStr(), e.getKind().size()), e.getPeer(), e.getTag(),
                   e.getBytes(), e.getGroup(), e.getStep(), e.getStartUs(), e.getEndUs(),
                   flight_state_name(static_cast<FlightState>(e.getState()))});
  }
}

ControlReply read_reply(proto::Reply::Reader r, const std::string& task) {
  ControlReply out;
  out.kind = r.getKind();
  if (static_cast<int>(out.kind) > static_cast<int>(proto::Reply::Kind::FLIGHT_RECORD))
    damaged(task, "an answer of unknown kind " + std::to_string(static_cast<int>(out.kind)));
  out.step_id = r.getStepId();
  out.handle = r.getHandle();
  if (r.getHasError()) out.error = error_from_proto(r.getError(), task);
  if (out.kind == proto::Reply::Kind::SIGNAL) {
    out.signal = r.getSignal();
    check_stop_signal(out.signal, task);
  }
  if (out.kind == proto::Reply::Kind::RUN_STEP) {
    read_step_tensors(r.getTensors(), out.step_id, task, out.tensors);
    read_gathered(r.getGathered(), out.step_id, task, out.gathered);
  }
  if (out.kind == proto::Reply::Kind::STALL_REPORT) {
    if (r.hasReport()) out.report = std::string(r.getReport().cStr(), std::min<size_t>(r.getReport().size(), 65536));
    out.in_collective = r.getInCollective();
  }
  if (out.kind == proto::Reply::Kind::FLIGHT_RECORD) {
    out.task_time_us = r.getTaskTime();
    out.flight_recorded = r.getFlightRecorded();
    read_flight_entries(r.getFlight(), task, out.flight);
  }
  if (out.kind == proto::Reply::Kind::TIMELINE) {
    out.task_time_us = r.getTaskTime();
    if (r.hasTimeline()) {
      const capnp::Data::Reader d = r.getTimeline();
      // Damaged events are a damaged message: InvalidArgument naming the task, like the rest.
      try {
        out.timeline = timeline::decode_events(
            std::string_view(reinterpret_cast<const char*>(d.begin()), d.size()), "task " + task);
      } catch (const InvalidArgument& e) {
        damaged(task, e.what());
      }
    }
  }
  return out;
}

}  // namespace

void write_flight_entries(std::span<const FlightEntry> entries, proto::Reply::Builder out) {
  auto list = out.initFlight(static_cast<unsigned>(entries.size()));
  for (size_t i = 0; i < entries.size(); ++i) {
    const FlightEntry& e = entries[i];
    auto w = list[static_cast<unsigned>(i)];
    w.setSeq(e.seq);
    w.setKind(e.kind);
    w.setPeer(e.peer);
    w.setTag(e.tag);
    w.setBytes(e.bytes);
    w.setGroup(e.group);
    w.setStep(e.step);
    w.setStartUs(e.start_us);
    w.setEndUs(e.end_us);
    w.setState(static_cast<uint8_t>(e.state));
  }
}

ControlReply decode_reply(std::span<const capnp::word> words, const std::string& task) {
  if (words.empty()) damaged(task, "empty");
  try {
    capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()), bounded(words));
    return read_reply(reader.getRoot<proto::Reply>(), task);
  } catch (const kj::Exception& e) {
    damaged(task, e.getDescription().cStr());
  }
}

}  // namespace weft
