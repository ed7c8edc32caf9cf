// Host <-> GPU copies (runtime/cuda/cuda_copy_engine.h through the Device interface) and moving
// tensors between devices (runtime/device_transfer.h), for sizes around the staging block sizes.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <future>
#include <numeric>
#include <thread>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/device_transfer.h"
#include "runtime/tensor_internals.h"

namespace weft::gpu_test {
namespace {

// Around the pool's small blocks (64 KiB), its chunks (4 MiB), and more chunks than a download
// keeps in flight (3).
const std::vector<size_t> kSizes = {0,           1,           4096,        (64 << 10) - 1, (64 << 10),
                                    (64 << 10) + 1, (4 << 20) - 1, (4 << 20), (4 << 20) + 3, (13 << 20) + 5};

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 2654435761u + seed) >> 7);
  return v;
}

void* device_alloc(Device& gpu, size_t n) { return n ? gpu.allocator().allocate(n) : nullptr; }

TEST(GpuTransfer, UploadAndDownloadEverySize) {
  WEFT_REQUIRE_GPU();
  Device& g = *gpu();
  for (size_t n : kSizes) {
    std::vector<unsigned char> src = pattern(n, 1), back(n, 0);
    void* d = device_alloc(g, n);
    g.copy_from_host(src.data(), d, n);
    // The source may be reused as soon as the upload returns.
    std::vector<unsigned char> original = src;
    std::fill(src.begin(), src.end(), 0xAB);
    g.copy_to_host(d, back.data(), n);
    EXPECT_EQ(back, original) << n << " bytes";
    if (d) g.allocator().deallocate(d, n);
  }
}

TEST(GpuTransfer, AsyncDownloadCallsBackOnceWithTheBytes) {
  WEFT_REQUIRE_GPU();
  Device& g = *gpu();
  for (size_t n : kSizes) {
    std::vector<unsigned char> src = pattern(n, 2), back(n, 0);
    void* d = device_alloc(g, n);
    g.copy_from_host(src.data(), d, n);
    std::promise<std::exception_ptr> done;
    int calls = 0;
    g.copy_to_host_async(d, back.data(), n, [&](std::exception_ptr e) {
      ++calls;
      done.set_value(e);
    });
    std::future<std::exception_ptr> f = done.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready) << n;
    EXPECT_FALSE(f.get()) << n;
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(back, src) << n << " bytes";
    if (d) g.allocator().deallocate(d, n);
  }
}

// Many downloads at once from several threads: each gets its own bytes.
TEST(GpuTransfer, ConcurrentAsyncDownloads) {
  WEFT_REQUIRE_GPU();
  Device& g = *gpu();
  constexpr int kCopies = 16;
  const size_t n = (5 << 20) + 17;
  std::vector<std::vector<unsigned char>> src(kCopies), back(kCopies, std::vector<unsigned char>(n));
  std::vector<void*> d(kCopies);
  for (int i = 0; i < kCopies; ++i) {
    src[i] = pattern(n, 10 + i);
    d[i] = device_alloc(g, n);
    g.copy_from_host(src[i].data(), d[i], n);
  }
  std::vector<std::promise<std::exception_ptr>> done(kCopies);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCopies; ++i)
    threads.emplace_back([&, i] {
      g.copy_to_host_async(d[i], back[i].data(), n, [&, i](std::exception_ptr e) { done[i].set_value(e); });
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kCopies; ++i) {
    std::future<std::exception_ptr> f = done[i].get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready) << i;
    EXPECT_FALSE(f.get());
    EXPECT_EQ(back[i], src[i]) << i;
    g.allocator().deallocate(d[i], n);
  }
}

// A kernel queued right after an upload reads the uploaded values (the compute stream waits for
// the copy stream), and a download right after a kernel sees what it wrote.
TEST(GpuTransfer, UploadsAndDownloadsAreOrderedWithKernels) {
  WEFT_REQUIRE_GPU();
  Device& g = *gpu();
  const Shape shape{(3 << 20) + 5};
  Tensor a = random_tensor(float32, shape, 7, Values::kGeneral);
  Tensor b = random_tensor(float32, shape, 8, Values::kGeneral);
  Tensor want = run_on(*cpu_device(), "Add", {a, b}, float32, shape);
  for (int round = 0; round < 3; ++round) {
    Tensor got = run_on(g, "Add", {a, b}, float32, shape);  // uploads, adds, downloads
    EXPECT_TRUE(same_values(want, got, 0)) << "round " << round;
  }
}

Tensor transfer(const Tensor& t, Device& to) {
  std::promise<std::pair<std::exception_ptr, Tensor>> p;
  transfer_async(t, to, [&](std::exception_ptr e, Tensor v) { p.set_value({e, std::move(v)}); });
  std::future<std::pair<std::exception_ptr, Tensor>> f = p.get_future();
  if (f.wait_for(std::chrono::seconds(60)) != std::future_status::ready) throw Internal("transfer did not finish");
  auto [e, v] = f.get();
  if (e) std::rethrow_exception(e);
  return v;
}

TEST(GpuTransfer, TensorsMoveBetweenHostAndGpu) {
  WEFT_REQUIRE_GPU();
  Device& g = *gpu();
  for (DType dt : {float32, float64, int32, int64, bool_, float16, bfloat16, uint8}) {
    for (int64_t n : {0, 1, 1000, (1 << 20) + 3}) {
      Tensor host = random_tensor(dt, Shape{n}, 40 + n, Values::kAllBits);
      Tensor on_gpu = transfer(host, g);
      EXPECT_EQ(on_gpu.device_ptr(), &g);
      EXPECT_EQ(on_gpu.shape(), host.shape());
      EXPECT_EQ(raw_data(transfer(on_gpu, g)), raw_data(on_gpu)) << "a tensor already there is handed over";
      Tensor back = transfer(on_gpu, *cpu_device());
      EXPECT_EQ(back.device_ptr(), cpu_device());
      EXPECT_EQ(host_bytes(back), host_bytes(host)) << dtype_name(dt) << " " << n;
    }
  }
}

// ---- between two GPUs of this process ----

// Whether the driver offers a direct path from GPU `from`'s memory pool to GPU `to`.
bool driver_has_peer_path(const Device& from, const Device& to) {
  int can = 0, pools = 0;
  return cudaDeviceCanAccessPeer(&can, to.index(), from.index()) == cudaSuccess && can &&
         cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, from.index()) == cudaSuccess && pools;
}

// Every dtype and size moves from one GPU to the other with its bytes, both ways, through
// transfer_async and Tensor::to alike; directly wherever the driver has a peer path.
TEST(GpuPeerTransfer, TensorsMoveBetweenTwoGpusWithTheirBytes) {
  const std::vector<Device*> gpus = two_gpus();
  if (gpus.empty()) GTEST_SKIP() << "needs two CUDA devices in one process";
  Device &g0 = *gpus[0], &g1 = *gpus[1];
  EXPECT_EQ(g0.can_copy_to_peer(g1), driver_has_peer_path(g0, g1));
  EXPECT_EQ(g1.can_copy_to_peer(g0), driver_has_peer_path(g1, g0));
  EXPECT_FALSE(g0.can_copy_to_peer(g0));
  EXPECT_FALSE(g0.can_copy_to_peer(*cpu_device()));
  for (DType dt : {float32, float64, int32, int64, bool_, float16, bfloat16, uint8}) {
    for (int64_t n : {0, 1, 1000, (1 << 20) + 3, (9 << 20) + 1}) {
      Tensor host = random_tensor(dt, Shape{n}, 60 + n, Values::kAllBits);
      Tensor on0 = transfer(host, g0);
      Tensor on1 = transfer(on0, g1);
      EXPECT_EQ(on1.device_ptr(), &g1);
      EXPECT_EQ(on1.shape(), host.shape());
      Tensor back0 = on1.to(&g0);
      EXPECT_EQ(back0.device_ptr(), &g0);
      EXPECT_EQ(host_bytes(on1), host_bytes(host)) << dtype_name(dt) << " " << n << " to GPU 1";
      EXPECT_EQ(host_bytes(back0), host_bytes(host)) << dtype_name(dt) << " " << n << " back to GPU 0";
    }
  }
}

// The copy is ordered on both sides: it reads what the source GPU's kernels wrote, the target's
// kernels read what it wrote, and the source may be dropped at once: the copy holds it until it
// has read it, so the next kernel on GPU 0 cannot get its block before.
TEST(GpuPeerTransfer, OrderedWithBothGpusKernelsWhenTheSourceIsDroppedAtOnce) {
  const std::vector<Device*> gpus = two_gpus();
  if (gpus.empty()) GTEST_SKIP() << "needs two CUDA devices in one process";
  Device &g0 = *gpus[0], &g1 = *gpus[1];
  register_builtin_ops();
  const OpDef& add = op_registry().get("Add");
  KernelFn add0 = find_kernel(add, DeviceType::CUDA, float32);
  ASSERT_NE(add0, nullptr);
  const Shape shape{(8 << 20) + 5};
  Tensor a = random_tensor(float32, shape, 71, Values::kGeneral), b = random_tensor(float32, shape, 72, Values::kGeneral);
  Tensor want = run_on(*cpu_device(), "Add", {a, b}, float32, shape);
  Tensor want_doubled = run_on(*cpu_device(), "Add", {want, want}, float32, shape);
  const Tensor a0 = a.to(&g0), b0 = b.to(&g0);
  auto sum_on = [&](Device& d, const Tensor& x, const Tensor& y) {
    std::vector<Tensor> ins = {x, y}, outs(1);
    run_kernel(add, add0, d, Attrs{}, ins, outs, [&](size_t) { return TensorMeta{float32, shape}; });
    return outs[0];
  };
  for (int round = 0; round < 4; ++round) {
    Tensor on1;
    {
      Tensor sum0 = sum_on(g0, a0, b0);  // queued on GPU 0, likely still running
      on1 = transfer(sum0, g1);
    }  // sum0 dropped: its block is free on GPU 0
    Tensor overwrite = sum_on(g0, b0, b0);  // may reuse sum0's block
    Tensor doubled = sum_on(g1, on1, on1);  // GPU 1 reads the copy
    EXPECT_TRUE(same_values(want, on1.to(cpu_device()), 0)) << "round " << round;
    EXPECT_TRUE(same_values(want_doubled, doubled.to(cpu_device()), 0)) << "round " << round;
  }
}

}  // namespace
}  // namespace weft::gpu_test
