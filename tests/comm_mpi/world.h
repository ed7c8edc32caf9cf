// This process's place in MPI_COMM_WORLD, for the tests that pair ranks up.
#pragma once

#include <mpi.h>

namespace weft::test_world {

inline int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

}  // namespace weft::test_world
