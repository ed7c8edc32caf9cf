// CUDA devices, one per visible GPU. Without a GPU (or without a driver) the list is empty and
// everything else keeps working on the CPU.
//
// The host waits for a GPU's compute stream in three places only: synchronize(), copy_to_host and
// copy_to_host_async. Each also raises the out-of-range ids the kernels recorded meanwhile
// (runtime/cuda/index_error_record.h), so such an error surfaces at the next read of a value.
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <string>

#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/cuda_copy_engine.h"
#include "runtime/cuda/index_error_record.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/kernel_registry.h"

namespace weft {

namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Internal(std::string("[cuda] ") + what + " failed with cuBLAS status " + std::to_string(int(status)));
}

cudaStream_t create_compute_stream(int index) {
  check_cuda(cudaSetDevice(index), "cudaSetDevice");
  cudaStream_t s = nullptr;
  // Non-blocking: the legacy default stream (used by libraries we do not control) must not
  // serialise with weft's work.
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate(compute)");
  return s;
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int index)
      : Device(local_device_name(DeviceType::CUDA, index), DeviceType::CUDA, index),
        stream_(create_compute_stream(index)),
        allocator_(index, stream_),
        index_errors_(index, stream_),
        copies_(index, stream_) {
    check_cuda(cudaEventCreateWithFlags(&source_ready_, cudaEventDisableTiming), "cudaEventCreate(peer)");
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    memory_bytes_ = static_cast<int64_t>(prop.totalGlobalMem);
    cores_ = prop.multiProcessorCount;
    model_ = prop.name;
  }
  // Devices live until the process ends (see local_devices), so this runs only in odd cases; it
  // must not throw.
  ~CudaDevice() override {
    ignore_cuda_error(cudaSetDevice(index_));
    if (source_ready_) ignore_cuda_error(cudaEventDestroy(source_ready_));
    if (context_) {
      if (context_->lt) cublasLtDestroy(context_->lt);
      if (context_->workspace) ignore_cuda_error(cudaFree(context_->workspace));
      if (context_->error_word) ignore_cuda_error(cudaFree(context_->error_word));
      if (context_->error_host) ignore_cuda_error(cudaFreeHost(context_->error_host));
    }
  }

  std::string description() const override { return model_ + ", " + std::to_string(cores_) + " SMs"; }
  Allocator& allocator() override { return allocator_; }
  ThreadPool& pool() override { return cpu_device()->pool(); }
  // The mark is taken before the download queues its wait for the compute stream, so every call
  // below it is done once the download is. An empty copy waits for nothing and so checks nothing.
  void copy_to_host(const void* src, void* dst, size_t bytes) override {
    if (bytes == 0) return;
    const uint64_t through = index_errors_.mark();
    copies_.download(src, dst, bytes);
    index_errors_.check(through);
  }
  void copy_from_host(const void* src, void* dst, size_t bytes) override { copies_.upload(src, dst, bytes); }
  void copy_to_host_async(const void* src, void* dst, size_t bytes,
                          std::function<void(std::exception_ptr)> done) override {
    if (bytes == 0) return copies_.download_async(src, dst, bytes, std::move(done));
    const uint64_t through = index_errors_.mark();
    copies_.download_async(src, dst, bytes, [this, through, done = std::move(done)](std::exception_ptr error) {
      if (!error) {
        try {
          index_errors_.check(through);
        } catch (...) {
          error = std::current_exception();
        }
      }
      done(error);
    });
  }
  void copy_on_device(const void* src, void* dst, size_t bytes) override {
    if (bytes == 0) return;
    check_cuda(cudaSetDevice(index_), "cudaSetDevice");
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "copy on device");
  }
  bool can_copy_to_peer(Device& to) override {
    auto* peer = dynamic_cast<CudaDevice*>(&to);
    return peer && peer != this && allocator_.share_with(peer->index_);
  }
  // On the peer's compute stream, after an event of this GPU's: the copy waits for the source's
  // producers (and for the peer's earlier work, which may still use the destination's block), but
  // this GPU never waits for the peer: a stream waiting for another GPU's queue would serialise a
  // pipeline over the two, and could wait on a collective that needs this GPU's later work. The
  // caller's `read` holds the source until the peer's copy engine sees the copy done.
  void copy_to_peer(const void* src, Device& to, void* dst, size_t bytes, std::function<void()> read) override {
    if (!can_copy_to_peer(to)) return Device::copy_to_peer(src, to, dst, bytes, std::move(read));  // throws
    if (bytes == 0) return read();
    auto* peer = static_cast<CudaDevice*>(&to);
    bool queued = false;
    try {
      {
        std::lock_guard<std::mutex> lock(peer_mu_);
        check_cuda(cudaSetDevice(index_), "cudaSetDevice");
        check_cuda(cudaEventRecord(source_ready_, stream_), "cudaEventRecord(before peer copy)");
        check_cuda(cudaSetDevice(peer->index_), "cudaSetDevice");
        check_cuda(cudaStreamWaitEvent(peer->stream_, source_ready_, 0), "cudaStreamWaitEvent(peer copy after source)");
      }
      check_cuda(cudaMemcpyPeerAsync(dst, peer->index_, src, index_, bytes, peer->stream_), "copy between GPUs");
      queued = true;
      peer->copies_.when_reached(peer->stream_, [read](std::exception_ptr) { read(); });
    } catch (...) {
      if (queued) ignore_cuda_error(cudaStreamSynchronize(peer->stream_));  // nothing reads src after this
      read();
      throw;
    }
  }
  void synchronize() override { index_errors_.synchronize_and_check(); }

  CudaContext& context() {
    std::call_once(context_once_, [this] { context_ = make_context(); });
    check_cuda(cudaSetDevice(index_), "cudaSetDevice");
    return *context_;
  }

 private:
  // On failure call_once rethrows and the next call tries again; a half-made context is freed.
  std::unique_ptr<CudaContext> make_context() {
    check_cuda(cudaSetDevice(index_), "cudaSetDevice");
    auto c = std::make_unique<CudaContext>();
    c->stream = stream_;
    c->device = index_;
    c->sm_count = cores_;
    c->index_errors = &index_errors_;
    struct Cleanup {  // frees what was made if a later step throws
      CudaContext* c;
      ~Cleanup() {
        if (!c) return;
        if (c->lt) cublasLtDestroy(c->lt);
        if (c->workspace) ignore_cuda_error(cudaFree(c->workspace));
        if (c->error_word) ignore_cuda_error(cudaFree(c->error_word));
        if (c->error_host) ignore_cuda_error(cudaFreeHost(c->error_host));
      }
    } cleanup{c.get()};
    check_cublas(cublasLtCreate(&c->lt), "cublasLtCreate");
    // The workspace and the error word live outside the pool: they are never freed while the
    // device is in use, and cudaMalloc'd memory needs no stream ordering.
    check_cuda(cudaMalloc(&c->workspace, kCublasLtWorkspaceBytes), "cudaMalloc(cuBLASLt workspace)");
    c->workspace_bytes = kCublasLtWorkspaceBytes;
    void* word = nullptr;
    check_cuda(cudaMalloc(&word, sizeof(int32_t)), "cudaMalloc(error word)");
    c->error_word = static_cast<int32_t*>(word);
    check_cuda(cudaMemset(c->error_word, 0, sizeof(int32_t)), "cudaMemset(error word)");
    void* host = nullptr;
    check_cuda(cudaMallocHost(&host, sizeof(int32_t)), "cudaMallocHost(error word)");
    c->error_host = static_cast<int32_t*>(host);
    cleanup.c = nullptr;
    return c;
  }

  cudaStream_t stream_;
  std::mutex peer_mu_;                  // one peer copy from this GPU is queued at a time
  cudaEvent_t source_ready_ = nullptr;  // recorded on the compute stream, waited by a peer's
  CudaAllocator allocator_;
  IndexErrorRecord index_errors_;  // before copies_: the callbacks of its downloads check it
  CudaCopyEngine copies_;
  std::string model_;
  std::once_flag context_once_;
  std::unique_ptr<CudaContext> context_;
};

}  // namespace

CudaContext& cuda_context(Device& device) {
  auto* gpu = dynamic_cast<CudaDevice*>(&device);
  if (!gpu) throw FailedPrecondition("[cuda] " + device.name() + " is not a CUDA device");
  return gpu->context();
}

CudaContext& cuda_context(const KernelContext& ctx) { return cuda_context(ctx.device); }

int32_t read_error_word(CudaContext& cu) {
  check_cuda(cudaMemcpyAsync(cu.error_host, cu.error_word, sizeof(int32_t), cudaMemcpyDeviceToHost, cu.stream),
             "read error word");
  check_cuda(cudaStreamSynchronize(cu.stream), "cudaStreamSynchronize(compute)");
  int32_t code = *cu.error_host;
  if (code != 0) clear_error_word(cu);
  return code;
}

void clear_error_word(CudaContext& cu) {
  check_cuda(cudaMemsetAsync(cu.error_word, 0, sizeof(int32_t), cu.stream), "clear error word");
}

void check_launch(const KernelContext& ctx) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Internal("[" + ctx.op.display + "] CUDA kernel launch failed: " + cudaGetErrorString(err));
}

std::vector<std::unique_ptr<Device>> create_cuda_devices() {
  std::vector<std::unique_ptr<Device>> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the "no driver" / "no device" error
    return out;
  }
  for (int i = 0; i < count; ++i) out.push_back(std::make_unique<CudaDevice>(i));
  return out;
}

bool cuda_compiled_in() { return true; }

}  // namespace weft
