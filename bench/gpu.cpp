// GPU benchmarks (weft issue 16), weft against the device's own limits in one run:
//   GEMM 4096^3, float32 and bfloat16, through weft's matmul  vs cuBLASLt called directly
//   Add of 256M float32                                        vs cudaMemcpy D2D bandwidth
//   eager relu(a + b) on 4-element GPU tensors, per call       (libtorch with CUDA: Debian's has
//                                                               none; bench/gpu_libtorch_peer.sh
//                                                               builds a peer against PyTorch's)
//   the MLP training step (784-128x3-10, batch 256, SGD), traced, on the GPU
// Built only with CUDA. Without a GPU (or driver) it prints "no GPU" and exits 0.
//
// Timing: wall time of a batch of calls followed by a synchronisation of the stream that ran
// them, best of several rounds (bench_util.h), so launch latency is amortised the same way for
// weft and for the direct calls. float32 GEMMs are full FP32 on both sides (no TF32).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/eager_fusion.h"
#include "bench/bench_util.h"
#include "bench/gpu_raw_launch.h"
#include "bench/weft_mlp.h"
#include "runtime/device.h"
#include "runtime/tensor_internals.h"
#include "weft/weft.h"

using namespace weft;
using weft::bench::fmt;
using weft::bench::Row;

namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void lt_ok(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cublasLtGetStatusString(s));
}

Device* first_gpu() {
  for (Device* d : local_devices())
    if (d->type() == DeviceType::CUDA) return d;
  return nullptr;
}

// C = A B for row-major n x n matrices straight through cuBLASLt (C^T = B^T A^T column-major), the
// heuristic's first algorithm, a 32 MiB workspace: what a careful caller of the library does.
class DirectGemm {
 public:
  DirectGemm(DType dtype, int64_t n) : n_(n) {
    const bool bf16 = dtype == bfloat16;
    type_ = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    lt_ok(cublasLtCreate(&lt_), "cublasLtCreate");
    cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_ok(cudaMalloc(&workspace_, kWorkspace), "cudaMalloc(workspace)");
    lt_ok(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    lt_ok(cublasLtMatrixLayoutCreate(&layout_, type_, n, n, n), "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t pref;
    lt_ok(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t ws = kWorkspace;
    lt_ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
          "set workspace");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    lt_ok(cublasLtMatmulAlgoGetHeuristic(lt_, desc_, layout_, layout_, layout_, layout_, pref, 1, &result, &found),
          "cublasLtMatmulAlgoGetHeuristic");
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0) throw std::runtime_error("cuBLASLt found no algorithm");
    algo_ = result.algo;
  }
  ~DirectGemm() {
    cublasLtMatrixLayoutDestroy(layout_);
    cublasLtMatmulDescDestroy(desc_);
    cudaFree(workspace_);
    cudaStreamDestroy(stream_);
    cublasLtDestroy(lt_);
  }
  void run(const void* a, const void* b, void* c) {
    const float one = 1.f, zero = 0.f;
    lt_ok(cublasLtMatmul(lt_, desc_, &one, b, layout_, a, layout_, &zero, c, layout_, c, layout_, &algo_, workspace_,
                         kWorkspace, stream_),
          "cublasLtMatmul");
  }
  void sync() { cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  static constexpr size_t kWorkspace = size_t{32} << 20;
  int64_t n_;
  cudaDataType_t type_;
  cublasLtHandle_t lt_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layout_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

void gemm(std::vector<Row>& rows, Device& gpu, DType dtype) {
  constexpr int64_t n = 4096;
  const std::string name = std::string("GEMM 4096^3 ") + std::string(dtype_name(dtype));
  try {
    DeviceScope scope("/gpu:0");
    Tensor a = cast(random::normal({n, n}, 0, 1, 1), dtype), b = cast(random::normal({n, n}, 0, 1, 2), dtype);
    Tensor c = Tensor::empty(dtype, Shape{n, n}, &gpu);
    DirectGemm direct(dtype, n);
    gpu.synchronize();
    constexpr int kBatch = 10;
    auto [w, d] = bench::seconds_per_call_paired(
        [&] {
          for (int i = 0; i < kBatch; ++i) Tensor y = matmul(a, b);
          gpu.synchronize();
        },
        [&] {
          for (int i = 0; i < kBatch; ++i) direct.run(raw_data(a), raw_data(b), raw_data(c));
          direct.sync();
        },
        1, 10);
    w /= kBatch;
    d /= kBatch;
    const double flops = 2.0 * n * n * n;
    rows.push_back({name, fmt("%.1f TFLOP/s", flops / w / 1e12), "cuBLASLt " + fmt("%.1f TFLOP/s", flops / d / 1e12),
                    fmt("%.3fx cuBLASLt", d / w), ">= 0.95x cuBLAS"});
  } catch (const std::exception& e) {
    rows.push_back({name, "failed", e.what(), "", ">= 0.95x cuBLAS"});
  }
}

void add_bandwidth(std::vector<Row>& rows, Device& gpu) {
  const int64_t n = int64_t{256} << 20;
  try {
    DeviceScope scope("/gpu:0");
    Tensor a = random::uniform({n}, 0, 1, 1), b = random::uniform({n}, 0, 1, 2);
    Tensor dst = Tensor::empty(float32, Shape{n}, &gpu);
    cudaStream_t s = nullptr;
    cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    gpu.synchronize();
    const size_t bytes = static_cast<size_t>(n) * 4;
    auto [w, m] = bench::seconds_per_call_paired(
        [&] {
          for (int i = 0; i < 5; ++i) Tensor y = a + b;
          gpu.synchronize();
        },
        [&] {
          for (int i = 0; i < 5; ++i) cuda_ok(cudaMemcpyAsync(raw_data(dst), raw_data(a), bytes, cudaMemcpyDeviceToDevice, s), "memcpy");
          cuda_ok(cudaStreamSynchronize(s), "sync");
        },
        1, 10);
    cudaStreamDestroy(s);
    w /= 5;
    m /= 5;
    const double add_bw = 3.0 * bytes / w, copy_bw = 2.0 * bytes / m;  // bytes read + written
    rows.push_back({"add, 256M float32", fmt("%.0f GB/s", add_bw / 1e9), "cudaMemcpy D2D " + fmt("%.0f GB/s", copy_bw / 1e9),
                    fmt("%.0f%% of copy", 100 * add_bw / copy_bw), ">= 85% of copy bandwidth"});
  } catch (const std::exception& e) {
    rows.push_back({"add, 256M float32", "failed", e.what(), "", ">= 85% of copy bandwidth"});
  }
}

void small_eager(std::vector<Row>& rows, Device& gpu) {
  try {
    DeviceScope scope("/gpu:0");
    // Operands already on the GPU, as the peer's are: constant() makes host tensors, and an op
    // on the GPU would upload them on every call.
    Tensor a = constant({1.f, -2.f, 3.f, -4.f}).to(&gpu), b = constant({0.5f, 0.5f, -5.f, 5.f}).to(&gpu);
    const int calls = 20000;
    // Eager fusion (on GPUs by default) defers relu(a + b) until it is needed; evaluate() issues
    // its one kernel here, as a use of y would.
    const double w = bench::seconds_per_call([&] { evaluate(relu(a + b)); }, calls);
    gpu.synchronize();
    const EagerFusion saved = eager_fusion();
    set_eager_fusion(EagerFusion::Off);
    const double separate = bench::seconds_per_call([&] { Tensor y = relu(a + b); }, calls);
    gpu.synchronize();
    set_eager_fusion(saved);
    rows.push_back({"eager relu(a + b), 4 floats, per call", fmt("%.2f us", w * 1e6), "libtorch CUDA: n/a", "n/a",
                    "<= 0.5x libtorch CUDA"});
    rows.push_back({"  the same, EagerFusion::Off (two launches)", fmt("%.2f us", separate * 1e6), "", "",
                    "breakdown"});
  } catch (const std::exception& e) {
    rows.push_back({"eager relu(a + b), 4 floats, per call", "failed", e.what(), "", ""});
  }
}

// Where an eager call's time goes: the device's floor for one tiny operation (a memset queued
// on a stream, an empty kernel, relu(a + b) as two plain kernels on buffers made once), the
// driver's stream-ordered allocation, weft's allocator, and each op alone.
void eager_breakdown(std::vector<Row>& rows, Device& gpu) {
  try {
    DeviceScope scope("/gpu:0");
    cudaStream_t stream = nullptr;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    void* block = nullptr;
    cuda_ok(cudaMalloc(&block, 16), "cudaMalloc");
    const int calls = 20000;
    const double memset = bench::seconds_per_call([&] { cudaMemsetAsync(block, 0, 16, stream); }, calls);
    cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const double driver_alloc = bench::seconds_per_call([&] {
      void* p = nullptr;
      cudaMallocAsync(&p, 16, stream);
      cudaFreeAsync(p, stream);
    }, calls);
    cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cuda_ok(cudaFree(block), "cudaFree");
    // Plain kernels with buffers made once: the launches' own cost, with nothing of weft's.
    const double empty_launch = bench::seconds_per_call([&] { bench::raw_empty_launch(stream); }, calls);
    float* raw = nullptr;
    cuda_ok(cudaMalloc(&raw, 4 * 4 * sizeof(float)), "cudaMalloc");
    cuda_ok(cudaMemsetAsync(raw, 0, 4 * 4 * sizeof(float), stream), "cudaMemsetAsync");
    const double raw_add_relu =
        bench::seconds_per_call([&] { bench::raw_add_relu(raw, raw + 4, raw + 8, raw + 12, 4, stream); }, calls);
    cuda_ok(cudaGetLastError(), "raw launches");
    cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cuda_ok(cudaFree(raw), "cudaFree");
    cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
    const double set_device = bench::seconds_per_call([&] { cudaSetDevice(gpu.index()); }, calls);
    const double last_error = bench::seconds_per_call([&] { (void)cudaGetLastError(); }, calls);
    Allocator& a = gpu.allocator();
    const double weft_alloc = bench::seconds_per_call([&] { a.deallocate(a.allocate(16), 16); }, calls);
    Tensor x = constant({1.f, -2.f, 3.f, -4.f}).to(&gpu), y = constant({0.5f, 0.5f, -5.f, 5.f}).to(&gpu);
    const double add = bench::seconds_per_call([&] { Tensor z = x + y; }, calls);
    const double relu_only = bench::seconds_per_call([&] { Tensor z = relu(x); }, calls);
    gpu.synchronize();
    rows.push_back({"  floor: cudaMemsetAsync 16 B, per call", fmt("%.2f us", memset * 1e6), "", "", "breakdown"});
    rows.push_back({"  floor: empty kernel <<<1, 1>>>, per launch", fmt("%.2f us", empty_launch * 1e6), "", "", "breakdown"});
    rows.push_back({"  floor: relu(a + b) as 2 plain kernels, 4 floats", fmt("%.2f us", raw_add_relu * 1e6), "", "",
                    "breakdown"});
    rows.push_back({"  cudaMallocAsync + cudaFreeAsync 16 B", fmt("%.2f us", driver_alloc * 1e6), "", "", "breakdown"});
    rows.push_back({"  cudaSetDevice (the current one)", fmt("%.3f us", set_device * 1e6), "", "", "breakdown"});
    rows.push_back({"  cudaGetLastError", fmt("%.3f us", last_error * 1e6), "", "", "breakdown"});
    rows.push_back({"  weft allocate + deallocate 16 B", fmt("%.2f us", weft_alloc * 1e6), "", "", "breakdown"});
    rows.push_back({"  weft eager a + b, 4 floats", fmt("%.2f us", add * 1e6), "", "", "breakdown"});
    rows.push_back({"  weft eager relu(a), 4 floats", fmt("%.2f us", relu_only * 1e6), "", "", "breakdown"});
  } catch (const std::exception& e) {
    rows.push_back({"  eager breakdown", "failed", e.what(), "", "breakdown"});
  }
}

void traced_mlp(std::vector<Row>& rows, Device& gpu) {
  constexpr int64_t kBatch = bench::kMlpBatch;
  try {
    DeviceScope scope("/gpu:0");
    bench::WeftMlp mlp;
    Tensor x = random::normal({kBatch, 784}, 0, 1, 11);
    Tensor y = cast(random::uniform({kBatch}, 0, 9.99, 12), int32);
    auto step = function([&](Tensor xb, Tensor yb) { return mlp.train_step(xb, yb); });
    const float first = step(x, y).item<float>();
    const double w = bench::seconds_per_call([&] { step(x, y).item<float>(); }, 100);
    const float last = step(x, y).item<float>();
    gpu.synchronize();
    // WEFT_BENCH_TRACE=path: ten more steps recorded as a Chrome trace, to see where a step goes.
    if (const char* path = std::getenv("WEFT_BENCH_TRACE")) {
      profiler::start();
      for (int i = 0; i < 10; ++i) step(x, y).item<float>();
      profiler::stop(path);
    }
    rows.push_back({"MLP 784-128x3-10, batch 256, traced step", fmt("%.3f ms", w * 1e3),
                    fmt("loss %.3f -> ", first) + fmt("%.3f", last), "", "reported"});
  } catch (const std::exception& e) {
    rows.push_back({"MLP 784-128x3-10, batch 256, traced step", "failed", e.what(), "", "reported"});
  }
}

}  // namespace

// `bench_gpu eager`: the eager rows alone.
int main(int argc, char** argv) {
  const bool eager_only = argc > 1 && std::string(argv[1]) == "eager";
  Device* gpu = first_gpu();
  if (!gpu) {
    std::printf("no GPU: %s; nothing to measure\n",
                cuda_compiled_in() ? "no CUDA device or driver" : "weft was built without CUDA");
    return 0;
  }
  std::printf("weft GPU benchmark on %s (%s)\n", gpu->name().c_str(), gpu->description().c_str());
  std::vector<Row> rows;
  if (!eager_only) {
    gemm(rows, *gpu, float32);
    gemm(rows, *gpu, bfloat16);
    add_bandwidth(rows, *gpu);
  }
  small_eager(rows, *gpu);
  eager_breakdown(rows, *gpu);
  if (!eager_only) traced_mlp(rows, *gpu);
  weft::bench::print_table("GPU: weft against cuBLASLt and the device's copy bandwidth (best of 10 rounds)", rows);
  return 0;
}
