#include "cluster/control_channel.h"

#include <thread>

#include <capnp/serialize.h>

#include "runtime/error.h"

namespace weft {

ControlChannel::~ControlChannel() {
  std::lock_guard lock(mu_);
  for (Pending& p : pending_) {
    int done = 0;
    MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Cancel(&p.request);
      MPI_Request_free(&p.request);
    }
  }
}

void ControlChannel::reap_locked() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    int done = 0;
    MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    it = done ? pending_.erase(it) : std::next(it);
  }
}

void ControlChannel::send(int rank, int tag, capnp::MessageBuilder& message) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  std::lock_guard lock(mu_);
  reap_locked();
  Pending& p = pending_.emplace_back(Pending{MPI_REQUEST_NULL, std::move(words)});
  const size_t bytes = p.words.size() * sizeof(capnp::word);
  if (bytes > kMaxMessageBytes) {
    pending_.pop_back();
    throw InvalidArgument("[cluster] a control message of " + std::to_string(bytes) + " bytes is over the limit of " +
                          std::to_string(kMaxMessageBytes));
  }
  MPI_Isend(p.words.begin(), static_cast<int>(bytes), MPI_BYTE, rank, tag, comm_, &p.request);
}

void ControlChannel::flush(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      reap_locked();
      if (pending_.empty()) return;
    }
    if (std::chrono::steady_clock::now() > deadline) return;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::optional<ControlChannel::Message> ControlChannel::try_receive(int tag, int source) {
  int found = 0;
  MPI_Message handle;
  MPI_Status status;
  {
    std::lock_guard lock(mu_);
    reap_locked();
  }
  MPI_Improbe(source, tag, comm_, &found, &handle, &status);
  if (!found) return std::nullopt;
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  Message m;
  m.source = status.MPI_SOURCE;
  const bool whole = bytes >= 0 && bytes % static_cast<int>(sizeof(capnp::word)) == 0;
  m.words.resize(whole ? static_cast<size_t>(bytes) / sizeof(capnp::word) : (static_cast<size_t>(bytes) + 7) / 8);
  // The matched message must be received whatever it holds, or it would stay queued forever.
  MPI_Mrecv(m.words.data(), bytes, MPI_BYTE, &handle, MPI_STATUS_IGNORE);
  if (!whole || m.words.empty())
    throw InvalidArgument("[cluster] damaged control message from rank " + std::to_string(m.source) + ": " +
                          std::to_string(bytes) + " bytes is not a whole Cap'n Proto message");
  return m;
}

}  // namespace weft
