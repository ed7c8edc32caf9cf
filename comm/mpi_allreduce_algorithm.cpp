#include "comm/mpi_allreduce_algorithm.h"

#include <cstdlib>

#include <mpi.h>

namespace weft {

namespace {
constexpr int kAutomatic = 0, kRing = 1;
}  // namespace

int libnbc_iallreduce_algorithm_for(int64_t bytes, int processes) {
  // Measured on this machine type (2 cores, Open MPI 4.1, shared memory), best of 5, in us:
  //
  //   processes  bytes   blocking  libnbc auto  libnbc ring
  //   2          4 KiB      2.7        5.9          1.8
  //   2          1 MiB    149        222          117
  //   2          64 MiB 56075      40192        23631
  //   4          4 KiB     22.2       22.5         36.5
  //   4          256 KiB  154        151          156
  //   4          1 MiB    503        475          430
  //   4          4 MiB   4094       3674         2767
  //
  // Tiny messages are latency-bound, where the ring's 2(p - 1) rounds lose to the automatic
  // choice's log p rounds once there are more than 2 processes; from about half a megabyte the
  // ring's bandwidth wins at every size.
  if (processes < 2) return kAutomatic;
  const int64_t ring_from = processes == 2 ? int64_t{4} << 10 : int64_t{512} << 10;
  return bytes >= ring_from ? kRing : kAutomatic;
}

AllreduceAlgorithmChooser::AllreduceAlgorithmChooser() {
  if (std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm")) return;  // the user chose
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return;
  t_initialised_ = true;
  int index = -1;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS) return;
  MPI_T_cvar_handle handle;
  int count = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) return;
  if (count != 1) {
    MPI_T_cvar_handle_free(&handle);
    return;
  }
  handle_ = handle;
}

AllreduceAlgorithmChooser::~AllreduceAlgorithmChooser() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (handle_ && !finalized) {
    auto handle = static_cast<MPI_T_cvar_handle>(handle_);
    if (current_ > 0) {
      int automatic = kAutomatic;
      MPI_T_cvar_write(handle, &automatic);
    }
    MPI_T_cvar_handle_free(&handle);
  }
  if (t_initialised_) MPI_T_finalize();
}

void AllreduceAlgorithmChooser::before(int64_t bytes, int processes) {
  if (!handle_) return;
  int want = libnbc_iallreduce_algorithm_for(bytes, processes);
  if (want == current_) return;
  // A refused write leaves libnbc's own choice, which is correct, only slower.
  auto handle = static_cast<MPI_T_cvar_handle>(handle_);
  if (MPI_T_cvar_write(handle, &want) == MPI_SUCCESS) {
    current_ = want;
    return;
  }
  MPI_T_cvar_handle_free(&handle);
  handle_ = nullptr;
}

}  // namespace weft
