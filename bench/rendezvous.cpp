// The in-process rendezvous, per tensor handed over (goal: well under 1 us):
//   send, then recv_async of the waiting tensor          (the consumer is late)
//   recv_async, then the send that completes it           (the consumer waits)
//   one thread sending, another receiving, keys in order (the cross-thread steady state)
// weft is the CPU time per tensor (both threads' in the two-thread row), the peer column the
// wall time, which on a shared machine also counts time spent descheduled.
// Keys are built once, as an executor builds them once per step; the tensor is shared, as a
// Send kernel hands over its input. No peer: libtorch has no rendezvous; the floor row times the
// same lock, hash lookup and callback without any rendezvous logic, for scale.
#include <time.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench/bench_util.h"
#include "runtime/local_rendezvous.h"
#include "weft/weft.h"

using namespace weft;
using weft::bench::fmt;

namespace {

// Best-of CPU time of this thread per call: on a shared machine wall time also counts the time
// the thread was not running at all.
template <class F>
double cpu_seconds_per_call(F&& f, int calls, int repeats = 5) {
  auto now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  for (int i = 0; i < calls / 10; ++i) f();
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    double t0 = now();
    for (int i = 0; i < calls; ++i) f();
    best = std::min(best, (now() - t0) / calls);
  }
  return best;
}

}  // namespace

int main() {
  const std::string src = "/job:localhost/replica:0/task:0/device:CPU:0";
  const std::string dst = "/job:localhost/replica:0/task:0/device:CPU:1";
  constexpr int kKeys = 64;
  std::vector<RendezvousKey> keys;
  for (int i = 0; i < kKeys; ++i)
    keys.push_back({src, process_incarnation(), dst, "block_" + std::to_string(i) + "/dense/MatMul:0", 12345});
  Tensor t = constant({1.f, 2.f, 3.f, 4.f});
  LocalRendezvous rdv;
  std::vector<weft::bench::Row> rows;
  const int calls = 200000;
  int k = 0;
  int64_t received = 0;
  auto count = [&received](std::exception_ptr, Tensor, bool) { ++received; };

  auto row = [&](const std::string& name, auto&& f) {
    double cpu = cpu_seconds_per_call(f, calls);
    double wall = bench::seconds_per_call(f, calls);
    rows.push_back({name, fmt("%.3f us cpu", cpu * 1e6), fmt("wall %.3f us", wall * 1e6), "", "< 1 us"});
  };
  row("send, then recv_async", [&] {
    const RendezvousKey& key = keys[k++ & (kKeys - 1)];
    rdv.send(key, t);
    rdv.recv_async(key, count);
  });
  row("recv_async, then send", [&] {
    const RendezvousKey& key = keys[k++ & (kKeys - 1)];
    rdv.recv_async(key, count);
    rdv.send(key, t);
  });

  {  // Two threads; the receiver posts recvs ahead, the sender completes them.
    constexpr int kSteps = 2000;
    std::vector<RendezvousKey> many;
    for (int s = 0; s < kSteps; ++s)
      for (int i = 0; i < kKeys; ++i) {
        RendezvousKey key = keys[i];
        key.step_id = s;
        many.push_back(std::move(key));
      }
    auto process_cpu = [] {
      timespec ts;
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    };
    double best = 1e30, best_cpu = 1e30;
    for (int round = 0; round < 5; ++round) {
      std::atomic<int64_t> done{0};
      double c0 = process_cpu();
      auto t0 = std::chrono::steady_clock::now();
      std::thread receiver([&] {
        for (const RendezvousKey& key : many)
          rdv.recv_async(key, [&done](std::exception_ptr, Tensor, bool) { done.fetch_add(1, std::memory_order_relaxed); });
      });
      std::thread sender([&] {
        for (const RendezvousKey& key : many) rdv.send(key, t);
      });
      receiver.join();
      sender.join();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best_cpu = std::min(best_cpu, (process_cpu() - c0) / static_cast<double>(many.size()));
      if (done.load() != static_cast<int64_t>(many.size())) {
        std::fprintf(stderr, "lost tensors: %lld of %zu\n", static_cast<long long>(done.load()), many.size());
        return 1;
      }
      best = std::min(best, s / static_cast<double>(many.size()));
    }
    rows.push_back({"2 threads, send || recv_async", fmt("%.3f us cpu", best_cpu * 1e6), fmt("wall %.3f us", best * 1e6),
                    "", "< 1 us"});
  }

  {  // The floor: one mutex, one hash-map insert and erase and one callback, nothing else.
    std::mutex mu;
    std::unordered_map<RendezvousKey, Tensor, RendezvousKeyHash> map;
    auto floor_round = [&] {
      const RendezvousKey& key = keys[k++ & (kKeys - 1)];
      {
        std::lock_guard<std::mutex> lock(mu);
        map.try_emplace(key, t);
      }
      Tensor got;
      {
        std::lock_guard<std::mutex> lock(mu);
        auto it = map.find(key);
        got = std::move(it->second);
        map.erase(it);
      }
      count(nullptr, std::move(got), false);
    };
    rows.push_back({"floor: mutex + map insert/erase", fmt("%.3f us cpu", cpu_seconds_per_call(floor_round, calls) * 1e6),
                    fmt("wall %.3f us", bench::seconds_per_call(floor_round, calls) * 1e6), "", ""});
  }
  if (rdv.pending() != 0) {
    std::fprintf(stderr, "rendezvous not empty: %zu\n", rdv.pending());
    return 1;
  }
  weft::bench::print_table("LocalRendezvous: cost per tensor handed over (" + std::to_string(received) + " checked)", rows);
  return 0;
}
