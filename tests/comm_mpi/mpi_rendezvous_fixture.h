// What the MPI rendezvous tests share (mpi_rendezvous_test.cpp, device_payloads_test.cpp): a
// fixture with its own communicator, keys between ranks, deterministic tensors, a recv outcome to
// wait for, and a barrier that cannot hang.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi_rendezvous.h"
#include "runtime/device_name.h"
#include "runtime/error.h"
#include "runtime/tensor_internals.h"

namespace weft {

inline constexpr std::chrono::milliseconds kWait{20000};  // a healthy exchange takes milliseconds; this only bounds a hang

inline std::string device(int task, int index = 0) {
  return "/job:worker/replica:0/task:" + std::to_string(task) + "/device:CPU:" + std::to_string(index);
}

// Tasks of job "worker" are ranks; other jobs and tasks beyond the world have no rank.
inline int rank_of(std::string_view name, int size) {
  try {
    DeviceSpec d = DeviceSpec::parse(name);
    if (d.job != "worker" || !d.task || *d.task >= size) return -1;
    return *d.task;
  } catch (const Error&) {
    return -1;
  }
}

inline std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& err) {
    return err.what();
  }
}

// A recv_async outcome another thread waits for.
struct Pending {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  Tensor value;

  Rendezvous::DoneCallback callback() {
    return [this](std::exception_ptr e, Tensor v, bool) {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
      error = std::move(e);
      value = std::move(v);
      cv.notify_all();
    };
  }
  bool wait(std::chrono::milliseconds timeout = kWait) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return done; });
  }
};

// Deterministic contents that depend on the sender, the receiver and the tensor's index.
inline Tensor make_tensor(DType dtype, Shape shape, int from, int to, int index) {
  Tensor t = Tensor::empty(dtype, shape);
  auto* bytes = static_cast<unsigned char*>(t.nbytes() ? raw_data(t) : nullptr);
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<unsigned char>((i * 7 + from * 31 + to * 17 + index * 5) & 0xff);
  if (dtype == DType::Bool)
    for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] &= 1;
  return t;
}

inline void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.nbytes(), want.nbytes()) << what;
  if (want.nbytes()) {
    EXPECT_EQ(std::memcmp(raw_data(got), raw_data(want), want.nbytes()), 0) << what << ": contents differ";
  }
}

class MpiRendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_rank(comm_, &me_);
    MPI_Comm_size(comm_, &size_);
    ASSERT_GE(size_, 2) << "run under mpirun -np 2 or more";
    // A key names its producer's incarnation, which only the producer's process knows.
    incarnations_.resize(static_cast<size_t>(size_));
    const uint64_t mine = process_incarnation();
    MPI_Allgather(&mine, 1, MPI_UINT64_T, incarnations_.data(), 1, MPI_UINT64_T, comm_);
  }
  void TearDown() override {
    sync();
    MPI_Comm_free(&comm_);
  }

  std::unique_ptr<MpiRendezvous> make(MpiRendezvousOptions options = {}) {
    const int size = size_;
    return std::make_unique<MpiRendezvous>(comm_, [size](std::string_view d) { return rank_of(d, size); }, std::move(options));
  }
  RendezvousKey key(int from, int to, const std::string& edge, int64_t step = 1, int from_index = 0,
                    int to_index = 0) const {
    return {device(from, from_index), incarnations_[static_cast<size_t>(from)], device(to, to_index), edge, step};
  }
  // A barrier that cannot hang: a rank that lost its way (a failed test skipping its part) would
  // leave the others waiting forever, so after a while the whole run aborts.
  void sync() {
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int flag = 0;
    while (MPI_Test(&r, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "[rank %d] barrier timed out\n", me_);
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int me_ = 0;
  int size_ = 0;
  std::vector<uint64_t> incarnations_;
};

}  // namespace weft
