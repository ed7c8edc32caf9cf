// The MPI rendezvous between two ranks (run under `mpirun -np 2`), against raw MPI_Send/MPI_Recv
// of the same bytes in the same run:
//   one-way latency of a 4-byte tensor (half a ping-pong)
//   one-way time of a 1 MiB tensor (half a ping-pong)
// Rounds of weft and of raw MPI alternate, and the best round of each counts, so that both see
// the same states of a shared machine. The rendezvous's receive side wakes from a short nap to
// test its requests, which is most of its latency; the goal column says what is expected.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "comm/mpi_rendezvous.h"
#include "runtime/device_name.h"
#include "runtime/tensor_internals.h"
#include "weft/weft.h"

using namespace weft;
using weft::bench::fmt;

namespace {

std::string device(int task) { return "/job:worker/replica:0/task:" + std::to_string(task) + "/device:CPU:0"; }

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int me = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (me == 0) std::fprintf(stderr, "run under mpirun -np 2\n");
    MPI_Finalize();
    return 1;
  }
  const int peer = 1 - me;
  MPI_Comm data, raw;
  MPI_Comm_dup(MPI_COMM_WORLD, &data);
  MPI_Comm_dup(MPI_COMM_WORLD, &raw);
  std::vector<uint64_t> incarnation(2);
  const uint64_t mine = process_incarnation();
  MPI_Allgather(&mine, 1, MPI_UINT64_T, incarnation.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  std::vector<bench::Row> rows;
  {
    MpiRendezvous rdv(data, [](std::string_view d) {
      DeviceSpec s = DeviceSpec::parse(d);
      return s.task && *s.task < 2 ? *s.task : -1;
    });
    int64_t step = 0;
    const auto timeout = std::chrono::milliseconds(30000);
    // One ping-pong through the rendezvous: rank 0 sends, rank 1 sends it back.
    auto weft_round_trip = [&](const Tensor& t) {
      ++step;
      RendezvousKey there{device(0), incarnation[0], device(1), "ping:0", step};
      RendezvousKey back{device(1), incarnation[1], device(0), "pong:0", step};
      if (me == 0) {
        rdv.send(there, t);
        rdv.recv(back, timeout);
      } else {
        Tensor got = rdv.recv(there, timeout).value;
        rdv.send(back, got);
      }
    };
    auto raw_round_trip = [&](const Tensor& t) {
      const int n = static_cast<int>(t.nbytes());
      if (me == 0) {
        MPI_Send(raw_data(t), n, MPI_BYTE, peer, 1, raw);
        MPI_Recv(raw_data(t), n, MPI_BYTE, peer, 2, raw, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(raw_data(t), n, MPI_BYTE, peer, 1, raw, MPI_STATUS_IGNORE);
        MPI_Send(raw_data(t), n, MPI_BYTE, peer, 2, raw);
      }
    };
    struct Size {
      const char* name;
      int64_t floats;
      int calls;
      const char* goal;
    };
    for (const Size& s : {Size{"one-way latency, 4 B", 1, 2000, "< 100 us (a nap or two)"},
                          Size{"one-way time, 1 MiB", 1 << 18, 200, "within 1.5x of raw MPI"}}) {
      Tensor t = Tensor::empty(DType::Float32, {s.floats});
      std::memset(raw_data(t), 1, t.nbytes());
      MPI_Barrier(MPI_COMM_WORLD);
      // Both ranks run the same number of calls, so the pairing never drifts.
      auto [w, r] = bench::seconds_per_call_paired([&] { weft_round_trip(t); }, [&] { raw_round_trip(t); },
                                                   s.calls, /*rounds=*/10);
      rows.push_back({s.name, fmt("%.1f us", w / 2 * 1e6), fmt("raw MPI %.1f us", r / 2 * 1e6), fmt("%.2fx", w / r),
                      s.goal});
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (me == 0) bench::print_table("MpiRendezvous between 2 ranks vs raw MPI_Send/MPI_Recv (best round)", rows);
  MPI_Comm_free(&data);
  MPI_Comm_free(&raw);
  MPI_Finalize();
  return 0;
}
