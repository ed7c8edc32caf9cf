// The meeting point of Send and Recv kernels: a tensor sent under a key is handed to the recv of
// the same key, whichever comes first. In-process now (runtime/local_rendezvous.h), MPI and NCCL
// between processes later; executors see only this interface.
//
//   RendezvousKey key{src_device, process_incarnation(), dst_device, "MatMul:0", step_id};
//   rendezvous.send(key, t);                                    // never blocks
//   rendezvous.recv_async(key, [](std::exception_ptr error, Tensor t, bool is_dead) { ... });
//
// Waiting never blocks a thread: recv_async completes through its callback, inline when the
// tensor is already there, else on the sender's thread (or the aborting one). Errors travel as
// std::exception_ptr holding a weft::Error subclass.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>

#include "runtime/attr.h"
#include "runtime/tensor.h"

namespace weft {

// A random 64-bit number drawn once per process (never 0): a key names its producer's
// incarnation so that a tensor from a restarted task is told apart from one its predecessor sent.
uint64_t process_incarnation();

// Which tensor, between which devices, in which step.
struct RendezvousKey {
  std::string src_device;     // the producer's full device name
  uint64_t src_incarnation = 0;
  std::string dst_device;     // the consumer's full device name
  std::string edge_name;      // the edge the tensor travels, unique within a step ("MatMul:0")
  int64_t step_id = 0;

  // The canonical form, "src;incarnation;dst;edge;step", e.g.
  // "/job:localhost/replica:0/task:0/device:CPU:0;0123456789abcdef;/job:localhost/replica:0/task:0/device:CPU:1;x:0;7"
  // with the incarnation as 16 lowercase hex digits. parse(to_string()) gives back a valid key.
  std::string to_string() const;
  // The inverse of to_string, for keys that crossed a process: untrusted, so every field is
  // checked. InvalidArgument naming the key and what is wrong.
  static RendezvousKey parse(std::string_view text);
  // InvalidArgument unless both devices are full canonical names, the edge name is 1 to
  // kMaxEdgeName bytes without ';' or control characters, and the step id is not negative.
  void validate() const;

  friend bool operator==(const RendezvousKey&, const RendezvousKey&) = default;
};

inline constexpr size_t kMaxEdgeName = 4096;

// The key of one step's transfer by a Send or Recv node: the partitioner (scheduler/passes/
// partition.h) gives both nodes of a pair the attributes send_device, send_device_incarnation
// (the uint64 bit-cast to int64), recv_device and tensor_name; the step id comes at run time.
// Validated: InvalidArgument naming what is wrong.
RendezvousKey rendezvous_key_of(const Attrs& transfer_attrs, int64_t step_id);
// The same without validation, for the Send and Recv kernels: their infer functions validated
// the attributes when the node was made (or loaded), and a kernel runs once per step.
RendezvousKey rendezvous_key_of_checked_attrs(const Attrs& transfer_attrs, int64_t step_id);

// What a Recv node accepts: its dtype, and its shape with -1 for each dim it does not know.
struct RecvExpectation {
  DType dtype = DType::Float32;
  Shape shape;

  // Whether a tensor of `dtype` and `shape` can be what the Recv expects.
  bool admits(DType d, const Shape& s) const;
  // "float32(2, None)"
  std::string to_string() const;
};

// Not noexcept on purpose: libstdc++'s hash tables then keep each element's hash, so erasing or
// rehashing does not hash the key again.
struct RendezvousKeyHash {
  size_t operator()(const RendezvousKey& k) const;
};

class Rendezvous {
 public:
  // `error` is null on success; `value` is then the sent tensor and `is_dead` says whether the
  // producer's branch was not taken (control flow). On error `value` is empty.
  using DoneCallback = std::function<void(std::exception_ptr error, Tensor value, bool is_dead)>;

  virtual ~Rendezvous() = default;

  // recv_async for a recv that accepts only what `expected` admits. A rendezvous that brings
  // tensors from other processes refuses one announced with a dtype or shape that cannot match
  // before it receives the tensor's bytes or allocates them, failing the key's step with an error
  // naming the key, the peer, what was announced and what the recv expects; one announced before
  // the recv came is checked by the recv when they meet. By default the same as recv_async (a
  // recv still checks what it gets).
  virtual void recv_async_expecting(const RendezvousKey& key, const RecvExpectation& expected, DoneCallback done) {
    (void)expected;
    recv_async(key, std::move(done));
  }
  // Hands `value` to the recv of `key`, now or when it comes. Never blocks. Throws the abort error
  // when the rendezvous or the key's step was aborted, and Internal when `key` was already sent
  // and not yet received.
  virtual void send(const RendezvousKey& key, Tensor value, bool is_dead = false) = 0;
  // Calls `done` exactly once: with the tensor sent under `key`, or with an error (the abort
  // error, or Internal when another recv already waits for the same key). `done` runs inline when
  // the outcome is known now, else on the thread of the send, abort or cleanup that decides it;
  // it must not throw.
  virtual void recv_async(const RendezvousKey& key, DoneCallback done) = 0;
  // Fails every pending and every future recv and send on this rendezvous with `error` (the
  // first abort wins; later ones are ignored) and drops the tensors not yet received.
  // InvalidArgument for a null error.
  virtual void start_abort(std::exception_ptr error) = 0;
  // The same for one step: its pending and future recvs and sends fail with `error` until
  // cleanup_step(step_id); other steps go on.
  virtual void abort_step(int64_t step_id, std::exception_ptr error) = 0;
  // The step is over: drops the tensors it sent that nobody received and forgets its abort.
  // A recv of the step still waiting fails with FailedPrecondition (the step ended without its
  // tensor). Step ids are not reused after cleanup.
  virtual void cleanup_step(int64_t step_id) = 0;

  // Whether send() takes `value`, a tensor in a GPU's memory bound for another process, where it
  // is and moves it GPU to GPU (the NCCL rendezvous), rather than needing it in host memory first.
  // A GPU's Send kernel asks before it sends to another process.
  virtual bool takes_device_tensor(const RendezvousKey& key, const Tensor& value) const {
    (void)key;
    (void)value;
    return false;
  }
  // A recv of `key` is about to wait for a tensor of `bytes` (its shape fully known). Only a hint:
  // a rendezvous that polls for other processes' tensors may poll sooner (the MPI progress
  // engine naps up to a millisecond once idle); a step's rendezvous passes on only the
  // tensors too large to ride in its messages (scheduler/step_rendezvous.h).
  virtual void expect_transfer(const RendezvousKey& key, uint64_t bytes) {
    (void)key;
    (void)bytes;
  }

  struct Received {
    Tensor value;
    bool is_dead = false;
  };
  // Blocks until the tensor of `key` arrives; for tests and tools, never for kernels.
  // Rethrows the recv's error; DeadlineExceeded naming the key after `timeout`, in which case
  // the recv stays registered and swallows the tensor if it comes later.
  Received recv(const RendezvousKey& key, std::chrono::milliseconds timeout);
};

}  // namespace weft
