// A task killed mid-step (SIGKILL, as the OOM killer does): the chief must report it as an
// Unavailable naming the task within 15 seconds, and then every process must end. ctest runs this
// under mpirun --enable-recovery (what weft-launch does), with 3 ranks and a 3 s liveness timeout;
// rank 2 kills itself 1.5 s after start. The test passes when the chief prints its report.
// With WEFT_TEST_DATA_PARALLEL=1 the chief trains data-parallel instead of running a Session, so
// the lost task is one the step's gradient all-reduce waits for.
// With WEFT_TEST_CHIEF_DIES=1 the chief kills itself instead, right after start-up: the tasks
// must notice the silence and end the job (they print why). With WEFT_TEST_PROFILE=1 the chief
// starts and stops the profiler instead of running steps: gathering the timeline must end the
// same way, with the lost task named.
//
// With WEFT_TEST_EXTERNAL_FAULT=1 nobody kills itself: tests/cluster_mpi/fault_times_test.sh makes
// the fault from outside (a signal, kill -9, SIGSTOP) once the chief prints "steps running", and
// finds each process by the file WEFT_TEST_PID_DIR/pid.RANK that it writes at start.
//
// With WEFT_TEST_STUCK_KERNEL=1 task 2 runs a kernel that never returns (TestSleep of 10 minutes)
// under short stall limits (1 s, 2 s) and WEFT_STALL_RECLAIM_MS=1000: the chief's step is ended
// as DeadlineExceeded with the report; task 2, whose thread cannot be reclaimed, ends itself with
// the report (scheduler/stall_watchdog.h); the chief's next steps name it lost. The chief prints
// "stuck kernel: ..." when all of that held.
// With WEFT_TEST_STUCK_AT_EXIT=1 the same kernel's step fails instead (task 1's TestSleep of -1 ms
// throws), so the step is aborted but not for running too long, and the chief's program then ends:
// task 2's exit would wait for its kernel forever; it ends itself once the reclaim grace after the
// shutdown is over, printing what still runs ("cannot be reclaimed"), and the job ends.
//
// Deaths during start-up (cluster/startup.h), with WEFT_STARTUP_TIMEOUT_MS=3000:
// - WEFT_TEST_DIES_BEFORE_JOINING=1: rank 2 dies before MPI_Init; the others are held in MPI_Init
//   until their start-up watchdogs end the job.
// - WEFT_TEST_DIES_IN_STARTUP=RANK: every process initialises MPI itself (as a program that uses
//   MPI before weft does), then RANK dies before cluster::init; the chief names the task whose
//   device report never came (RANK 2), or the tasks report that start-up did not finish (RANK 0).
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>
#include <cstdlib>
#include <functional>
#include <optional>
#include <iostream>
#include <string>
#include <thread>

#include "api/weft/weft.h"
#include "cluster/flight_record.h"
#include "cluster_mpi/test_sleep_op.h"
#include "runtime/device.h"

// With WEFT_TEST_CHECK_FLIGHT_RECORD=1 (and WEFT_FLIGHT_RECORDER_DIR a fresh directory): the
// failed step wrote one flight record, in which task 1 answered and the lost task 2 did not.
bool check_flight_record() {
  const char* dir = std::getenv("WEFT_FLIGHT_RECORDER_DIR");
  std::vector<std::filesystem::path> files;
  if (dir)
    for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  if (files.empty()) {
    std::cout << "WRONG: no flight record in " << (dir ? dir : "(WEFT_FLIGHT_RECORDER_DIR unset)") << std::endl;
    return false;
  }
  std::sort(files.begin(), files.end());
  std::ifstream in(files.front());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const weft::FlightRecord record = weft::flight_record_from_json(text);
  const bool ok = record.tasks.size() == 3 && record.tasks[1].answered && !record.tasks[1].entries.empty() &&
                  !record.tasks[2].answered;
  std::cout << (ok ? "flight record names the lost task: " : "WRONG flight record: ")
            << (record.tasks.size() == 3 ? record.tasks[2].why : "not 3 tasks") << std::endl;
  return ok;
}

int main(int argc, char** argv) {
  using namespace weft;
  const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
  const int rank = rank_text ? std::atoi(rank_text) : 0;
  if (const char* dir = std::getenv("WEFT_TEST_PID_DIR")) {
    std::FILE* f = std::fopen((std::string(dir) + "/pid." + std::to_string(rank)).c_str(), "w");
    if (f) {
      std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
      std::fclose(f);
    }
  }
  if (std::getenv("WEFT_TEST_CHECK_FLIGHT_RECORD") && rank == 0)
    if (const char* dir = std::getenv("WEFT_FLIGHT_RECORDER_DIR"))  // records of earlier runs
      for (const auto& e : std::filesystem::directory_iterator(dir)) std::filesystem::remove(e.path());
  const bool external_fault = std::getenv("WEFT_TEST_EXTERNAL_FAULT") != nullptr;
  if (std::getenv("WEFT_TEST_DIES_BEFORE_JOINING") && rank == 2) ::kill(::getpid(), SIGKILL);
  if (const char* dies = std::getenv("WEFT_TEST_DIES_IN_STARTUP")) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (rank == std::atoi(dies)) ::kill(::getpid(), SIGKILL);
    (void)cluster::init(argc, argv);
    std::cout << "WRONG: start-up finished without a task" << std::endl;
    return 1;
  }
  // The clock starts when rank 2 is well into cluster::init (its devices are made just before
  // the tasks' device reports), not at process start: the test is about a task lost mid-step.
  // Counted from process start, a slow start-up (the sanitizer build on a loaded machine) could let
  // the kill land inside start-up, which is a different failure with its own report and tests
  // (WEFT_TEST_DIES_IN_STARTUP, WEFT_TEST_DIES_BEFORE_JOINING).
  const bool stuck_at_exit = std::getenv("WEFT_TEST_STUCK_AT_EXIT") != nullptr;
  const bool stuck_kernel = stuck_at_exit || std::getenv("WEFT_TEST_STUCK_KERNEL") != nullptr;
  if (stuck_kernel) testing::register_test_sleep();  // on every task, before the op registries are compared
  if (rank == 2 && !std::getenv("WEFT_TEST_CHIEF_DIES") && !external_fault && !stuck_kernel)
    std::thread([] {
      while (!local_devices_created()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      ::kill(::getpid(), SIGKILL);
    }).detach();
  Cluster cluster = cluster::init(argc, argv);
  if (std::getenv("WEFT_TEST_CHIEF_DIES")) ::kill(::getpid(), SIGKILL);
  std::function<void()> run_step;
  Graph g;
  Tensor out;
  std::optional<Session> sess;
  const Tensor x = random::uniform({256, 256}, -0.1, 0.1, 3);
  nn::Sequential model{nn::Dense(256, nn::tanh), nn::Dense(1)};
  optim::SGD sgd(0.01);
  std::optional<distribute::DataParallel> dp;
  if (stuck_kernel) {
    Tensor ms;
    {
      GraphScope scope(g);
      ms = placeholder(float32, {1}, "ms");
      out = testing::sleep_then_double(ms, "/job:worker/task:2", "/job:worker/task:1");
      if (stuck_at_exit) {
        DeviceScope on("/job:worker/task:1");
        out = out + testing::test_sleep(ms * -1.f);
      }
    }
    if (stuck_at_exit) {
      Session failing(g, cluster, {.stall_warning_ms = 2000});
      try {
        (void)failing.run({{ms, constant(std::vector<float>{600000.f}, Shape{1})}}, {out});
      } catch (const InvalidArgument& e) {
        std::cout << "the step failed on task 1 while task 2 sleeps; the chief's program ends" << std::endl;
        return 0;
      }
      std::cout << "WRONG: the step did not fail" << std::endl;
      return 1;
    }
    Session stuck(g, cluster, {.stall_warning_ms = 1000, .stall_timeout_ms = 2000});
    const auto t0 = std::chrono::steady_clock::now();
    try {
      (void)stuck.run({{ms, constant(std::vector<float>{600000.f}, Shape{1})}}, {out});
      std::cout << "WRONG: the stuck step was not ended" << std::endl;
      return 1;
    } catch (const DeadlineExceeded& e) {
      if (std::string(e.what()).find("(test_sleep) created at") == std::string::npos) {
        std::cout << "WRONG REPORT: " << e.what() << std::endl;
        return 1;
      }
    }
    const double ended = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    try {
      for (;;) {
        try {
          (void)stuck.run({{ms, constant(std::vector<float>{1.f}, Shape{1})}}, {out});
        } catch (const DeadlineExceeded&) {
          // A step task 2 took part in as it ended itself (its stall timeout came first).
        }
      }
    } catch (const Unavailable& e) {
      const double lost = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const bool names_task = std::string(e.what()).find("/job:worker/replica:0/task:2") != std::string::npos;
      std::cout << (names_task ? "stuck kernel: " : "WRONG REPORT: ") << "the step was ended after " << ended
                << " s, and the task that could not reclaim its thread was lost after " << lost << " s: " << e.what()
                << std::endl;
      return names_task ? 0 : 1;
    }
  }
  if (std::getenv("WEFT_TEST_DATA_PARALLEL")) {
    dp.emplace(cluster);
    auto step = dp->function([&](Tensor xb) {
      GradientTape tape;
      Tensor loss = reduce_mean(square(model(xb)));
      auto vars = model.trainable_variables();
      sgd.apply_gradients(tape.gradient(loss, vars), vars);
      return loss;
    });
    run_step = [step, &x]() mutable { (void)step(x); };
  } else {
    {
      GraphScope scope(g);
      Tensor xp = placeholder(float32, {256, 256}, "x");
      Tensor h;
      {
        DeviceScope on("/job:worker/task:1");
        h = tanh(matmul(xp, xp));
      }
      DeviceScope on("/job:worker/task:2");
      out = reduce_sum(matmul(h, h));
    }
    sess.emplace(g, cluster);
    run_step = [&] { (void)sess->run({{"x:0", x}}, {out}); };
  }
  const auto start = std::chrono::steady_clock::now();
  const bool profile = std::getenv("WEFT_TEST_PROFILE") != nullptr;
  const std::string trace = "/tmp/weft_killed_worker_trace_" + std::to_string(::getpid()) + ".json";
  try {
    if (profile) {
      for (;;) {
        profiler::start();
        profiler::stop(trace);
      }
    }
    if (external_fault) {
      run_step();
      std::cout << "steps running" << std::endl;
    }
    for (;;) run_step();
  } catch (const Unavailable& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string what = e.what();
    if (profile) std::remove(trace.c_str());
    const bool names_task = what.find("/job:worker/replica:0/task:2") != std::string::npos;
    std::cout << (names_task && s < 15.0 ? "lost task reported" : "WRONG REPORT") << " after " << s << " s: " << what
              << std::endl;
    if (std::getenv("WEFT_TEST_CHECK_FLIGHT_RECORD")) return check_flight_record() && names_task ? 0 : 1;
    return names_task ? 0 : 1;
  } catch (const std::exception& e) {
    std::cout << "WRONG ERROR: " << e.what() << std::endl;
    return 1;
  }
}
