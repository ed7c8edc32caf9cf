// Messages of any length for the engine's listeners (comm/mpi_message_frame.h): the sender frames
// them, and a listener's standing receive takes each frame, checks its length against the
// listener's limit, receives the rest on the continuation tag, and hands the messages over in the
// order their frames came. And messages of any length for probe_listen: probed, their length
// checked, then received into a buffer of exactly that length.
#include <cstring>

#include "comm/mpi_message_frame.h"
#include "comm/mpi_progress_engine_impl.h"

namespace weft {

void MpiProgressEngine::Impl::listen(ClientId client, MPI_Comm comm, int tag, int source, size_t max_bytes,
                                     OnMessage on_message) {
  // A damaged or oversized message must come back as an error code, not end the process.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  auto l = std::make_shared<Listener>();
  l->client = client;
  l->comm = comm;
  l->tag = tag;
  l->source = source;
  l->max_bytes = max_bytes;
  l->on_message = std::move(on_message);
  l->frame.resize(mpi_frame::kFrameBytes / sizeof(uint64_t));
  {
    std::lock_guard lock(mu_);
    listeners_.push_back(l);
  }
  post_frame(l);
}

void MpiProgressEngine::Impl::post_frame(const std::shared_ptr<Listener>& l) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Irecv(l->frame.data(), static_cast<int>(mpi_frame::kFrameBytes), MPI_BYTE, l->source, l->tag,
                           l->comm, &r);
  if (rc != MPI_SUCCESS) {
    MpiMessage m;
    m.tag = l->tag;
    m.error = "cannot post the receive of messages: " + mpi_error_string(rc);
    l->on_message(std::move(m));
    return;
  }
  track(l->client, r, {.kind = "message recv", .peer = l->source, .tag = l->tag, .standing = true},
        [this, l](const MPI_Status& status, int error) { on_frame(l, status, error); }, l);
}

void MpiProgressEngine::Impl::on_frame(const std::shared_ptr<Listener>& l, const MPI_Status& status, int error) {
  auto in = std::make_shared<Incoming>();
  in->message.source = status.MPI_SOURCE;
  in->message.tag = l->tag;
  l->incoming.push_back(in);
  auto fail = [&](std::string why) {
    in->message.error = std::move(why);
    in->complete = true;
  };
  int received = 0;
  if (error == MPI_SUCCESS) MPI_Get_count(&status, MPI_BYTE, &received);
  const mpi_frame::FrameInfo f =
      error != MPI_SUCCESS ? mpi_frame::FrameInfo{.error = "a frame that could not be received: " + mpi_error_string(error)}
                           : mpi_frame::read_frame(static_cast<size_t>(std::max(received, 0)), l->frame[0], l->max_bytes);
  const int continuation_tag = l->tag + mpi_frame::kContinuationTagOffset;
  if (!f.error.empty()) {
    fail(f.error);
    // A refused message's continuation is taken into nothing (MPI reports the truncation), so
    // it does not wait in MPI's queue forever.
    if (f.continued && error == MPI_SUCCESS) {
      MPI_Request r = MPI_REQUEST_NULL;
      if (MPI_Irecv(nullptr, 0, MPI_BYTE, status.MPI_SOURCE, continuation_tag, l->comm, &r) == MPI_SUCCESS)
        track(l->client, r, {.kind = "refused message recv", .peer = status.MPI_SOURCE, .tag = continuation_tag},
              [](const MPI_Status&, int) {}, nullptr);
    }
  } else {
    in->message.bytes = static_cast<size_t>(f.length);
    in->message.words.resize((in->message.bytes + 7) / 8);
    char* into = reinterpret_cast<char*>(in->message.words.data());
    if (f.inline_bytes) std::memcpy(into, l->frame.data() + 1, f.inline_bytes);
    if (!f.continued) {
      in->complete = true;
    } else {
      const auto rest = static_cast<int>(f.length - f.inline_bytes);
      MPI_Request r = MPI_REQUEST_NULL;
      const int rc = MPI_Irecv(into + f.inline_bytes, rest, MPI_BYTE, status.MPI_SOURCE, continuation_tag, l->comm, &r);
      if (rc != MPI_SUCCESS) {
        fail("its continuation could not be received: " + mpi_error_string(rc));
      } else {
        track(l->client, r,
              {.kind = "message continuation recv", .peer = status.MPI_SOURCE, .tag = continuation_tag,
               .bytes = static_cast<uint64_t>(rest)},
              [this, l, in, rest](const MPI_Status& st, int e) {
                int got = 0;
                if (e == MPI_SUCCESS) MPI_Get_count(&st, MPI_BYTE, &got);
                if (e != MPI_SUCCESS || got != rest) {
                  in->message.error = e != MPI_SUCCESS ? "its continuation was not received: " + mpi_error_string(e)
                                                       : "a continuation of " + std::to_string(got) +
                                                             " bytes, where its frame announced " +
                                                             std::to_string(rest);
                  in->message.words.clear();
                  in->message.bytes = 0;
                }
                in->complete = true;
                deliver_in_order(*l);
              },
              in);
      }
    }
  }
  if (!in->message.error.empty()) {
    in->message.words.clear();
    in->message.bytes = 0;
  }
  deliver_in_order(*l);
  if (!l->dropped) post_frame(l);
}

void MpiProgressEngine::Impl::probe_listen(ClientId client, MPI_Comm comm, int tag, int source, size_t max_bytes,
                                           MpiOperation op, OnMessage on_message) {
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  auto p = std::make_shared<Prober>();
  p->client = client;
  p->comm = comm;
  p->tag = tag;
  p->source = source;
  p->max_bytes = max_bytes;
  p->op = std::move(op);
  p->on_message = std::move(on_message);
  {
    std::lock_guard lock(mu_);
    probers_.push_back(std::move(p));
    probers_changed_ = true;
  }
  wake();
}

bool MpiProgressEngine::Impl::probe() {
  if (probers_changed_.load(std::memory_order_acquire)) {
    std::lock_guard lock(mu_);
    probing_ = probers_;
    probers_changed_ = false;
  }
  bool any = false;
  for (const std::shared_ptr<Prober>& p : probing_) {
    // A few per round: a burst of headers is taken quickly, and one sender cannot hold the round.
    for (int k = 0; k < 16 && !p->dropped; ++k) {
      int flag = 0;
      MPI_Message message = MPI_MESSAGE_NULL;
      MPI_Status status;
      if (MPI_Improbe(p->source, p->tag, p->comm, &flag, &message, &status) != MPI_SUCCESS || !flag) break;
      any = true;
      int count = -1;
      if (MPI_Get_count(&status, MPI_BYTE, &count) != MPI_SUCCESS || count == MPI_UNDEFINED) count = -1;
      MpiMessage m;
      m.source = status.MPI_SOURCE;
      m.tag = p->tag;
      if (count < 0 || static_cast<size_t>(count) > p->max_bytes) {
        // Taken into nothing: MPI reports the truncation and writes no byte (on the single-copy
        // path too, where the read into a null buffer fails), and the message leaves MPI's queue.
        MPI_Request r = MPI_REQUEST_NULL;
        if (MPI_Imrecv(nullptr, 0, MPI_BYTE, &message, &r) == MPI_SUCCESS)
          track(p->client, r, {.kind = "refused message recv", .peer = m.source, .tag = p->tag},
                [](const MPI_Status&, int) {}, nullptr);
        m.error = "a message of " + (count < 0 ? std::string("unknown length") : std::to_string(count) + " bytes") +
                  ", over the limit of " + std::to_string(p->max_bytes);
        p->on_message(std::move(m));
        continue;
      }
      auto in = std::make_shared<MpiMessage>(std::move(m));
      in->bytes = static_cast<size_t>(count);
      in->words.resize((in->bytes + 7) / 8);
      MPI_Request r = MPI_REQUEST_NULL;
      const int rc = MPI_Imrecv(in->words.data(), count, MPI_BYTE, &message, &r);
      if (rc != MPI_SUCCESS) {
        in->words.clear();
        in->bytes = 0;
        in->error = "a message that could not be received: " + mpi_error_string(rc);
        p->on_message(std::move(*in));
        continue;
      }
      MpiOperation op = p->op;
      op.peer = in->source;
      op.tag = p->tag;
      op.bytes = in->bytes;
      track(p->client, r, std::move(op),
            [p, in](const MPI_Status&, int error) {
              if (error != MPI_SUCCESS) {
                in->words.clear();
                in->bytes = 0;
                in->error = "a message that could not be received: " + mpi_error_string(error);
              }
              if (!p->dropped) p->on_message(std::move(*in));
            },
            in);
    }
  }
  return any;
}

void MpiProgressEngine::Impl::deliver_in_order(Listener& l) {
  while (!l.incoming.empty() && l.incoming.front()->complete) {
    std::shared_ptr<Incoming> in = std::move(l.incoming.front());
    l.incoming.pop_front();
    l.on_message(std::move(in->message));
  }
}

int MpiProgressEngine::send_message(ClientId client, MPI_Comm comm, int peer, int tag, const void* data, size_t bytes,
                                    std::shared_ptr<const void> keep, std::string what) {
  const size_t inline_bytes = std::min(bytes, mpi_frame::kInlineBytes);
  auto frame = std::make_shared<std::vector<uint64_t>>((mpi_frame::kLengthBytes + inline_bytes + 7) / 8);
  (*frame)[0] = bytes;
  if (inline_bytes) std::memcpy(frame->data() + 1, data, inline_bytes);
  const int rc = isend(client, frame->data(), static_cast<int>(mpi_frame::kLengthBytes + inline_bytes), peer, tag, comm,
                       {.kind = "message send", .peer = peer, .tag = tag, .bytes = bytes, .what = what},
                       [](const MPI_Status&, int) {}, frame);
  if (rc != MPI_SUCCESS || bytes == inline_bytes) return rc;
  const int continuation_tag = tag + mpi_frame::kContinuationTagOffset;
  return isend(client, static_cast<const char*>(data) + inline_bytes, static_cast<int>(bytes - inline_bytes), peer,
               continuation_tag, comm,
               {.kind = "message continuation send", .peer = peer, .tag = continuation_tag,
                .bytes = bytes - inline_bytes, .what = std::move(what)},
               [](const MPI_Status&, int) {}, std::move(keep));
}

}  // namespace weft
