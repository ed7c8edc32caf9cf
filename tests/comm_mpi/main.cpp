// The main of comm_mpi_tests, run under mpirun: every rank runs the same tests in the same order
// (they pair up through MPI), and a test failing on any rank fails that rank's exit status, which
// mpirun passes on. Only rank 0 prints the progress; other ranks print their failures only.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

namespace {

// Prints a failing assertion with its rank, for the ranks whose default printer is removed.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

// Under AddressSanitizer: Open MPI's components are dlopen'ed, built without frame pointers and
// unloaded by MPI_Finalize, so the fast unwinder stops at their first frame and their lifetime
// allocations show up as leaks of "<unknown module>" that lsan.supp cannot name. The slower full
// unwinder reaches libopen-pal.so / libmpi.so in those stacks, which lsan.supp suppresses. An
// ASAN_OPTIONS setting of the same name still wins; ignored in builds without the sanitizer.
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // Every rank learns whether any failed, so the run's status does not depend on which rank's
  // exit mpirun reports first.
  int any_failed = failed;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !failed) std::fprintf(stderr, "a test failed on another rank\n");
  MPI_Finalize();
  return any_failed;
}
