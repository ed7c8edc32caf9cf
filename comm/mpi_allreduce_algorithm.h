// Which of Open MPI's nonblocking all-reduce algorithms each MPI_Iallreduce uses.
//
// Open MPI runs MPI_Iallreduce through its libnbc component, whose automatic choice (binomial
// reduce then broadcast below 4 processes) was measured here at 1.2-1.6x the blocking
// MPI_Allreduce for the megabyte-sized gradient buckets of data parallelism; its ring algorithm
// was faster than the blocking call from a few kilobytes up on 2 processes and from half a
// megabyte on more (the table in the .cpp). libnbc reads its choice from a control variable on every
// call, which MPI_T lets a process write, so weft picks per call by message size. Every process
// picks alike for a given call (the size is the same everywhere), as MPI requires.
//
// The user's own setting wins: when OMPI_MCA_coll_libnbc_iallreduce_algorithm is in the
// environment, or the variable does not exist (another MPI), nothing is changed.
#pragma once

#include <cstdint>

namespace weft {

// libnbc's numbering: 0 automatic, 1 ring, 2 binomial, 3 Rabenseifner, 4 recursive doubling.
int libnbc_iallreduce_algorithm_for(int64_t bytes, int processes);

class AllreduceAlgorithmChooser {
 public:
  // Needs MPI initialised. Looks the control variable up once.
  AllreduceAlgorithmChooser();
  ~AllreduceAlgorithmChooser();
  AllreduceAlgorithmChooser(const AllreduceAlgorithmChooser&) = delete;
  AllreduceAlgorithmChooser& operator=(const AllreduceAlgorithmChooser&) = delete;

  // Call right before MPI_Iallreduce, serialised with every other MPI_Iallreduce of the process.
  void before(int64_t bytes, int processes);
  bool active() const { return handle_ != nullptr; }

 private:
  void* handle_ = nullptr;  // MPI_T_cvar_handle
  int current_ = -1;
  bool t_initialised_ = false;
};

}  // namespace weft
