#include "cluster/control_channel.h"

#include <memory>
#include <mutex>

#include <capnp/serialize.h>

#include "runtime/error.h"

namespace weft {

namespace {

const char* tag_name(int tag) { return tag == kRequestTag ? "request" : tag == kReplyTag ? "reply" : "message"; }

}  // namespace

ControlChannel::ControlChannel(MPI_Comm comm, MpiProgressEngine& engine)
    : comm_(comm), engine_(engine), client_(engine.add_client("control")) {}

ControlChannel::~ControlChannel() { engine_.cancel_client(client_, std::chrono::milliseconds(100)); }

void ControlChannel::send(int rank, int tag, capnp::MessageBuilder& message) {
  auto words = std::make_shared<kj::Array<capnp::word>>(capnp::messageToFlatArray(message));
  const size_t bytes = words->size() * sizeof(capnp::word);
  if (bytes > kMaxMessageBytes)
    throw InvalidArgument("[cluster] a control message of " + std::to_string(bytes) + " bytes is over the limit of " +
                          std::to_string(kMaxMessageBytes));
  const int rc = engine_.send_message(client_, comm_, rank, tag, words->begin(), bytes, words,
                                     std::string("control ") + tag_name(tag));
  // A send MPI refuses is a lost message: the waiter of its answer is bounded by liveness.
  if (rc != MPI_SUCCESS)
    throw Unavailable("[cluster] MPI could not send a control " + std::string(tag_name(tag)) + " to rank " +
                      std::to_string(rank) + ": " + mpi_error_string(rc));
}

void ControlChannel::listen(int tag, int source, std::function<void(Message)> on_message) {
  {
    std::unique_lock lock(listeners_mu_);
    if (!listeners_.emplace(tag, std::move(on_message)).second)
      throw Internal("[cluster] two listeners for control tag " + std::to_string(tag));
  }
  engine_.listen(client_, comm_, tag, source, kMaxMessageBytes, [this, tag](MpiMessage m) {
    Message out;
    out.source = m.source;
    if (!m.error.empty())
      out.error = "[cluster] damaged control message from rank " + std::to_string(m.source) + ": " + m.error;
    else if (m.bytes == 0 || m.bytes % sizeof(capnp::word) != 0)
      out.error = "[cluster] damaged control message from rank " + std::to_string(m.source) + ": " +
                  std::to_string(m.bytes) + " bytes is not a whole Cap'n Proto message";
    else
      out.storage = std::move(m.words);
    std::shared_lock lock(listeners_mu_);
    if (auto it = listeners_.find(tag); it != listeners_.end()) it->second(std::move(out));
  });
}

void ControlChannel::stop_listening(int tag) {
  std::unique_lock lock(listeners_mu_);
  listeners_.erase(tag);
}

void ControlChannel::flush(std::chrono::milliseconds timeout) { engine_.flush_sends(client_, timeout); }

}  // namespace weft
