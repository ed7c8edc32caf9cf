// Messages of any length for the engine's listeners (comm/mpi_message_frame.h): the sender frames
// them, and a listener's standing receive (into a buffer that ends at a guard page) takes each
// frame, checks its length against the listener's limit, probes for the rest on the continuation
// tag and receives it if it has the announced length, and hands the messages over in the order
// their frames came. Messages of any length for probe_listen: probed, their length checked, then
// received into a buffer of exactly that length. And irecv_probed's receives of a known length.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "comm/mpi_message_frame.h"
#include "comm/mpi_progress_engine_impl.h"
#include "runtime/error.h"

namespace weft {

MpiProgressEngine::Impl::GuardedFrame::GuardedFrame() {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t data = (mpi_frame::kFrameBytes + page - 1) / page * page;
  mapped_ = data + page;
  mapping_ = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping_ == MAP_FAILED) throw Internal("[mpi] cannot map a listener's frame buffer: " + std::string(std::strerror(errno)));
  char* guard = static_cast<char*>(mapping_) + data;
  if (::mprotect(guard, page, PROT_NONE) != 0) {
    const int e = errno;
    ::munmap(mapping_, mapped_);
    throw Internal("[mpi] cannot protect a listener's frame buffer: " + std::string(std::strerror(e)));
  }
  frame_ = reinterpret_cast<uint64_t*>(guard - mpi_frame::kFrameBytes);
}

MpiProgressEngine::Impl::GuardedFrame::~GuardedFrame() { ::munmap(mapping_, mapped_); }

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
  {
    std::lock_guard lock(mu_);
    l->yield_after_traffic = clients_[static_cast<size_t>(client)].yield_after_traffic;
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

namespace {

// Takes a probed message into nothing: MPI reports the truncation and writes no byte (on the
// single-copy path too, where the read into a null buffer fails), and the message leaves MPI's
// queue. Returns the request (MPI_REQUEST_NULL if MPI refused).
MPI_Request take_into_nothing(MPI_Message& message) {
  MPI_Request r = MPI_REQUEST_NULL;
  if (MPI_Imrecv(nullptr, 0, MPI_BYTE, &message, &r) != MPI_SUCCESS) return MPI_REQUEST_NULL;
  return r;
}

int probed_count(const MPI_Status& status) {
  int count = -1;
  if (MPI_Get_count(&status, MPI_BYTE, &count) != MPI_SUCCESS || count == MPI_UNDEFINED) return -1;
  return count;
}

}  // namespace

void MpiProgressEngine::Impl::on_frame(const std::shared_ptr<Listener>& l, const MPI_Status& status, int error) {
  auto in = std::make_shared<Incoming>();
  in->message.source = status.MPI_SOURCE;
  in->message.tag = l->tag;
  l->incoming.push_back(in);
  int received = 0;
  if (error == MPI_SUCCESS) MPI_Get_count(&status, MPI_BYTE, &received);
  // A frame longer than kFrameBytes completes as an error (MPI_ERR_TRUNCATE; on the single-copy
  // path the read stopped at the guard page): the sender is named, as for any damaged frame.
  const mpi_frame::FrameInfo f =
      error != MPI_SUCCESS
          ? mpi_frame::FrameInfo{.error = "a frame that could not be received (longer than " +
                                          std::to_string(mpi_frame::kFrameBytes) +
                                          " bytes, or damaged): " + mpi_error_string(error)}
          : mpi_frame::read_frame(static_cast<size_t>(std::max(received, 0)), l->frame.data()[0], l->max_bytes);
  if (!f.error.empty()) {
    in->message.error = f.error;
    // A refused message's continuation is taken into nothing when it comes, so that it does not
    // wait in MPI's queue forever (nor pass for a later message's).
    in->continued = in->discard = f.continued && error == MPI_SUCCESS;
    in->complete = !in->continued;
  } else {
    in->message.bytes = static_cast<size_t>(f.length);
    in->message.words.resize((in->message.bytes + 7) / 8);
    if (f.inline_bytes) std::memcpy(in->message.words.data(), l->frame.data() + 1, f.inline_bytes);
    if (f.continued) {
      in->inline_bytes = f.inline_bytes;
      in->rest = static_cast<size_t>(f.length) - f.inline_bytes;
      in->continued = true;
    } else {
      in->complete = true;
    }
  }
  if (in->continued && !l->continuing) {
    l->continuing = true;
    continuing_.push_back(l);
  }
  deliver_in_order(*l);
  if (!l->dropped) post_frame(l);
}

bool MpiProgressEngine::Impl::probe_continuations() {
  if (continuing_.empty()) return false;  // the usual case
  bool any = false;
  for (const std::shared_ptr<Listener>& l : continuing_) {
    // A source's continuations come in the order of its frames: each source's earliest awaited
    // one is probed for, the later ones once it has been matched.
    // (Collected first: a probe that completes a message hands it over, which changes `incoming`.)
    int sources[8];
    std::shared_ptr<Incoming> first[8];
    size_t n = 0;
    bool awaited = false;
    for (const std::shared_ptr<Incoming>& in : l->incoming) {
      if (!in->continued) continue;
      awaited = true;
      const int src = in->message.source;
      if (std::find(sources, sources + n, src) != sources + n) continue;
      if (n == std::size(sources)) break;  // the rest in a later round
      sources[n] = src;
      first[n++] = in;
    }
    for (size_t i = 0; i < n; ++i) any |= probe_rest(l, first[i]);
    l->continuing = awaited && !l->dropped;
  }
  std::erase_if(continuing_, [](const std::shared_ptr<Listener>& l) { return !l->continuing; });
  return any;
}

bool MpiProgressEngine::Impl::probe_rest(const std::shared_ptr<Listener>& l, const std::shared_ptr<Incoming>& in) {
  const int src = in->message.source;
  const int continuation_tag = l->tag + mpi_frame::kContinuationTagOffset;
  int flag = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  if (MPI_Improbe(src, continuation_tag, l->comm, &flag, &message, &status) != MPI_SUCCESS || !flag) return false;
  in->continued = false;  // matched: not probed for again
  const int count = probed_count(status);
  if (in->discard || count < 0 || static_cast<size_t>(count) != in->rest) {
    if (MPI_Request r = take_into_nothing(message); r != MPI_REQUEST_NULL)
      add_to_table(r, make_entry(
                          l->client, MpiOperation{.kind = "refused message recv", .peer = src, .tag = continuation_tag},
                          [](const MPI_Status&, int) {}, nullptr, l->yield_after_traffic));
    if (!in->discard) {
      in->message.error = "a continuation of " +
                          (count < 0 ? std::string("unknown length") : std::to_string(count) + " bytes") +
                          ", where its frame announced " + std::to_string(in->rest);
      in->message.words.clear();
      in->message.bytes = 0;
    }
    in->complete = true;
    deliver_in_order(*l);
    return true;
  }
  char* into = reinterpret_cast<char*>(in->message.words.data()) + in->inline_bytes;
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Imrecv(into, count, MPI_BYTE, &message, &r);
  if (rc != MPI_SUCCESS) {
    in->message.error = "its continuation could not be received: " + mpi_error_string(rc);
    in->message.words.clear();
    in->message.bytes = 0;
    in->complete = true;
    deliver_in_order(*l);
    return true;
  }
  add_to_table(r, make_entry(
                      l->client,
                      MpiOperation{.kind = "message continuation recv",
                                   .peer = src,
                                   .tag = continuation_tag,
                                   .bytes = static_cast<uint64_t>(count)},
                      [this, l, in](const MPI_Status&, int e) {
                        if (e != MPI_SUCCESS) {
                          in->message.error = "its continuation was not received: " + mpi_error_string(e);
                          in->message.words.clear();
                          in->message.bytes = 0;
                        }
                        in->complete = true;
                        deliver_in_order(*l);
                      },
                      in, l->yield_after_traffic));
  return true;
}

void MpiProgressEngine::Impl::irecv_probed(ClientId client, void* buffer, int bytes, int peer, int tag, MPI_Comm comm,
                                           MpiOperation op, Done done, std::shared_ptr<const void> keep) {
  std::lock_guard lock(mu_);
  if (shut_) return;  // nothing was posted: nothing for MPI to touch
  const auto yield_after = clients_[static_cast<size_t>(client)].yield_after_traffic;
  expected_inbox_.push_back(
      {buffer, bytes, peer, tag, comm,
       Entry{client, std::move(op), std::move(done), std::move(keep), Clock::now(), yield_after}});
  inbox_ready_.store(true, std::memory_order_release);
  if (nappers_ > 0)
    nap_cv_.notify_all();
  else if (lenders_ == 0 && standing_by_)
    standby_cv_.notify_all();
}

bool MpiProgressEngine::Impl::probe_expected(std::vector<Completed>& completed) {
  if (expected_.empty()) return false;
  bool any = false;
  std::lock_guard lock(table_mu_);
  size_t w = 0;
  const Expected* missed = nullptr;  // the last one whose message has not come
  for (size_t i = 0; i < expected_.size(); ++i) {
    Expected& x = expected_[i];
    // In the order they were asked for: a payload's messages share a tag and come in order, so
    // after one of them is not there, the rest of that payload's (asked for next) are not either.
    const bool same_as_missed = missed && missed->peer == x.peer && missed->tag == x.tag && missed->comm == x.comm;
    int flag = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    if (same_as_missed || MPI_Improbe(x.peer, x.tag, x.comm, &flag, &message, &status) != MPI_SUCCESS || !flag) {
      if (w != i) expected_[w] = std::move(x);
      missed = &expected_[w];
      ++w;
      continue;
    }
    any = true;
    const int count = probed_count(status);
    MPI_Request r = MPI_REQUEST_NULL;
    if (x.buffer && count == x.bytes) {
      const int rc = MPI_Imrecv(x.buffer, count, MPI_BYTE, &message, &r);
      if (rc == MPI_SUCCESS) {
        requests_.push_back(r);
        entries_.push_back(std::move(x.entry));
      } else {
        completed.push_back({std::move(x.entry.done), status, rc, x.entry.yield_after_traffic});
      }
      continue;
    }
    if ((r = take_into_nothing(message)) != MPI_REQUEST_NULL) {
      requests_.push_back(r);
      entries_.push_back(make_entry(
          x.entry.client, MpiOperation{.kind = "refused message recv", .peer = x.peer, .tag = x.tag},
          [](const MPI_Status&, int) {}, nullptr, x.entry.yield_after_traffic));
    }
    completed.push_back({std::move(x.entry.done), status, count == x.bytes ? MPI_SUCCESS : MPI_ERR_TRUNCATE,
                         x.entry.yield_after_traffic});
  }
  expected_.resize(w);
  return any;
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
          track(
              p->client, r, {.kind = "refused message recv", .peer = m.source, .tag = p->tag},
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
      track(
          p->client, r, std::move(op),
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
  const int rc = isend(
      client, frame->data(), static_cast<int>(mpi_frame::kLengthBytes + inline_bytes), peer, tag, comm,
      {.kind = "message send", .peer = peer, .tag = tag, .bytes = bytes, .what = what}, [](const MPI_Status&, int) {},
      frame);
  if (rc != MPI_SUCCESS || bytes == inline_bytes) return rc;
  const int continuation_tag = tag + mpi_frame::kContinuationTagOffset;
  return isend(
      client, static_cast<const char*>(data) + inline_bytes, static_cast<int>(bytes - inline_bytes), peer,
      continuation_tag, comm,
      {.kind = "message continuation send",
       .peer = peer,
       .tag = continuation_tag,
       .bytes = bytes - inline_bytes,
       .what = std::move(what)},
      [](const MPI_Status&, int) {}, std::move(keep));
}

}  // namespace weft
