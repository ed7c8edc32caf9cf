// CUDA MatMul and FusedMatMul through cuBLASLt, with the CPU kernels' attributes, batching and
// results (kernels/cpu/linalg.cpp, kernels/cpu/fused.cpp).
//
// Precision: float32 is computed in full FP32 (CUBLAS_COMPUTE_32F, never TF32), so results match
// the CPU's within float rounding of a different summation order; float64 in FP64; float16 and
// bfloat16 accumulate in FP32 and round once. int32/int64 (the CPU's other dtypes) go through a
// plain CUDA kernel with the CPU's wrap-around (matmul_kernels.cu), which also computes the rare
// float product cuBLASLt's heuristic has no algorithm for.
//
// Host cost: the geometry is a few integer operations per call; the cuBLASLt layouts and the
// heuristic's algorithm are cached per problem (shape, strides, alignment, epilogue, device) in a
// small thread-safe cache, so a repeated eager call costs a hash lookup, a stack-initialised
// matmul descriptor and the launch.
//
// FusedMatMul's bias runs in cuBLASLt's epilogue (CUBLASLT_EPILOGUE_BIAS); its activation in a
// small kernel after it, as weft's Relu/Sigmoid/Tanh compute it. Not CUBLASLT_EPILOGUE_RELU_BIAS:
// its relu is max(x, 0), which turns a NaN into 0 (and -0 into +0) where weft's relu, on the CPU
// and in the CUDA Relu, passes them through (tests/gpu/matmul_test.cpp checks a NaN bias). Where
// cuBLASLt offers no algorithm with the epilogue (or the bias is not 16-byte aligned), the
// product runs without it and that kernel adds the bias too.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matmul_geometry.h"
#include "kernels/cuda/matmul_kernels.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/error.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

void check_lt(cublasStatus_t status, const KernelContext& ctx, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Internal("[" + ctx.op.display + "] " + what + " failed: " + cublasLtGetStatusString(status));
}

struct LtTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};

LtTypes lt_types(DType dtype) {
  switch (dtype) {
    case DType::Float32: return {CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};  // pure FP32: no TF32
    case DType::Float64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    case DType::Float16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::BFloat16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    default: throw Internal("[matmul] no cuBLASLt types for " + std::string(dtype_name(dtype)));
  }
}

// What cuBLASLt adds after the product.
enum class LtEpilogue : uint8_t { kNone, kBias };

cublasLtEpilogue_t lt_epilogue(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

// Everything the layouts and the heuristic's choice depend on.
struct PlanKey {
  int device = 0;
  DType dtype = DType::Float32;
  LtEpilogue epilogue = LtEpilogue::kNone;
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0;
  int64_t count = 1, a_stride = 0, b_stride = 0, c_stride = 0;
  int align_a = 0, align_b = 0, align_c = 0;

  bool operator==(const PlanKey& o) const {
    return device == o.device && dtype == o.dtype && epilogue == o.epilogue && ta == o.ta && tb == o.tb && m == o.m &&
           n == o.n && k == o.k && lda == o.lda && ldb == o.ldb && count == o.count && a_stride == o.a_stride &&
           b_stride == o.b_stride && c_stride == o.c_stride && align_a == o.align_a && align_b == o.align_b &&
           align_c == o.align_c;
  }
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(static_cast<uint64_t>(k.device));
    mix(static_cast<uint64_t>(k.dtype) | static_cast<uint64_t>(k.epilogue) << 8 | uint64_t{k.ta} << 16 |
        uint64_t{k.tb} << 17);
    for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.count, k.a_stride, k.b_stride, k.c_stride})
      mix(static_cast<uint64_t>(v));
    mix(static_cast<uint64_t>(k.align_a) | static_cast<uint64_t>(k.align_b) << 16 |
        static_cast<uint64_t>(k.align_c) << 32);
    return static_cast<size_t>(h);
  }
};

// Immutable once made: layouts initialised in place (no cuBLASLt allocation to free) and the
// algorithm the heuristic chose. `with_epilogue` is false when cuBLASLt had no algorithm for the
// requested epilogue and the product runs without one.
struct Plan {
  // mutable: cuBLASLt's API takes non-const descriptors, though cublasLtMatmul only reads them.
  mutable cublasLtMatrixLayoutOpaque_t a{}, b{}, c{};
  cublasLtMatmulAlgo_t algo{};
  bool with_epilogue = false;
  bool plain = false;  // cuBLASLt offered no algorithm at all: the plain kernel computes the product
};

// The per-call matmul descriptor, initialised on the stack (cheap, and no state shared between
// threads: the bias pointer differs per call).
void init_desc(const KernelContext& ctx, cublasLtMatmulDescOpaque_t& desc, const LtTypes& t, const PlanKey& key,
               LtEpilogue epilogue, const void* bias) {
  auto* d = &desc;
  check_lt(cublasLtMatmulDescInit(d, t.compute, t.scale), ctx, "cublasLtMatmulDescInit");
  // cuBLASLt's A is weft's B (transposed with transpose_b), its B weft's A (see matmul_geometry.h).
  const cublasOperation_t op_a = key.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = key.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), ctx, "set TRANSA");
  check_lt(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), ctx, "set TRANSB");
  if (epilogue != LtEpilogue::kNone) {
    const cublasLtEpilogue_t e = lt_epilogue(epilogue);
    check_lt(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)), ctx, "set EPILOGUE");
    check_lt(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), ctx,
             "set BIAS_POINTER");
    const cudaDataType_t bias_type = t.data;
    check_lt(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)),
             ctx, "set BIAS_DATA_TYPE");
  }
}

void init_layout(const KernelContext& ctx, cublasLtMatrixLayoutOpaque_t& layout, cudaDataType_t type,
                 const LtMatrix& m, int64_t count, int64_t stride) {
  check_lt(cublasLtMatrixLayoutInit(&layout, type, static_cast<uint64_t>(m.rows), static_cast<uint64_t>(m.cols), m.ld),
           ctx, "cublasLtMatrixLayoutInit");
  if (count > 1) {
    const int32_t c = static_cast<int32_t>(count);
    check_lt(cublasLtMatrixLayoutSetAttribute(&layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &c, sizeof(c)), ctx,
             "set BATCH_COUNT");
    check_lt(cublasLtMatrixLayoutSetAttribute(&layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                              sizeof(stride)),
             ctx, "set STRIDED_BATCH_OFFSET");
  }
}

// Asks the heuristic for the best algorithm; false when there is none for this descriptor.
bool find_algo(const KernelContext& ctx, CudaContext& cu, const PlanKey& key, const LtTypes& t, Plan& plan,
               LtEpilogue epilogue, const void* bias) {
  cublasLtMatmulDescOpaque_t desc;
  init_desc(ctx, desc, t, key, epilogue, bias);
  cublasLtMatmulPreferenceOpaque_t pref;
  check_lt(cublasLtMatmulPreferenceInit(&pref), ctx, "cublasLtMatmulPreferenceInit");
  const uint64_t ws = cu.workspace_bytes;
  check_lt(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)), ctx,
           "set MAX_WORKSPACE_BYTES");
  const uint32_t al[4] = {static_cast<uint32_t>(key.align_a), static_cast<uint32_t>(key.align_b),
                          static_cast<uint32_t>(key.align_c), static_cast<uint32_t>(key.align_c)};
  const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    check_lt(cublasLtMatmulPreferenceSetAttribute(&pref, which[i], &al[i], sizeof(al[i])), ctx, "set MIN_ALIGNMENT");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(cu.lt, &desc, &plan.a, &plan.b, &plan.c, &plan.c,
                                                               &pref, 1, &result, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) return false;
  check_lt(status, ctx, "cublasLtMatmulAlgoGetHeuristic");
  plan.algo = result.algo;
  plan.with_epilogue = epilogue != LtEpilogue::kNone;
  return true;
}

std::shared_ptr<const Plan> make_plan(const KernelContext& ctx, CudaContext& cu, const PlanKey& key,
                                      const GemmGeometry& g, const void* bias) {
  const LtTypes t = lt_types(key.dtype);
  auto plan = std::make_shared<Plan>();
  init_layout(ctx, plan->a, t.data, g.lt_a, key.count, key.b_stride);  // cuBLASLt's A is weft's B
  init_layout(ctx, plan->b, t.data, g.lt_b, key.count, key.a_stride);
  init_layout(ctx, plan->c, t.data, g.lt_c, key.count, key.c_stride);
  if (find_algo(ctx, cu, key, t, *plan, key.epilogue, bias)) return plan;
  if (key.epilogue != LtEpilogue::kNone && find_algo(ctx, cu, key, t, *plan, LtEpilogue::kNone, nullptr)) return plan;
  // Slow but correct, and the result the same within float rounding.
  plan->plain = true;
  return plan;
}

// The cache: plans are shared so that trimming it never frees one a running call holds.
class PlanCache {
 public:
  std::shared_ptr<const Plan> get(const KernelContext& ctx, CudaContext& cu, const PlanKey& key,
                                  const GemmGeometry& g, const void* bias) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = plans_.find(key);
      if (it != plans_.end()) return it->second;
    }
    // The heuristic runs outside the lock; a racing thread's identical plan is simply replaced.
    std::shared_ptr<const Plan> plan = make_plan(ctx, cu, key, g, bias);
    std::lock_guard<std::mutex> lock(mu_);
    if (plans_.size() >= kMaxPlans) plans_.clear();  // a program with this many shapes: start over
    plans_[key] = plan;
    return plan;
  }

 private:
  static constexpr size_t kMaxPlans = 4096;
  std::mutex mu_;
  std::unordered_map<PlanKey, std::shared_ptr<const Plan>, PlanKeyHash> plans_;
};

PlanCache& plan_cache() {
  static PlanCache* cache = new PlanCache;  // never destroyed: kernels may run during exit
  return *cache;
}

// Runs g on the GPU: C = act(op(A) op(B) + bias), bias and act only for FusedMatMul (bias null
// and act kNone for MatMul).
void run_gemm(const KernelContext& ctx, DType dtype, const GemmGeometry& g, const void* a, const void* b, void* c,
              const void* bias, Activation act) {
  CudaContext& cu = cuda_context(ctx);
  if (g.m == 0 || g.n == 0 || g.runs.empty()) return;
  const size_t elem = dtype_size(dtype);
  const int64_t rows = g.runs.back().c_offset / g.n + g.runs.back().count * g.m;  // rows of C, all batches
  if (g.k == 0) {  // an empty sum: zeros (all-zero bits are 0 in every dtype), then the epilogue
    check_cuda(cudaMemsetAsync(c, 0, static_cast<size_t>(rows * g.n) * elem, cu.stream), "cudaMemsetAsync(matmul)");
    if (bias || act != Activation::kNone) {
      launch_bias_activation(dtype, c, bias, rows, g.n, act, cu.stream);
      check_launch(ctx);
    }
    return;
  }
  if (dtype == DType::Int32 || dtype == DType::Int64) {
    for (const GemmRun& run : g.runs) launch_plain_gemm(dtype, g, run, a, b, c, cu.stream);
    check_launch(ctx);
    return;
  }
  LtEpilogue wanted = LtEpilogue::kNone;
  if (bias && reinterpret_cast<uintptr_t>(bias) % 16 == 0) wanted = LtEpilogue::kBias;
  const LtTypes t = lt_types(dtype);
  const float one_f = 1.f, zero_f = 0.f;
  const double one_d = 1.0, zero_d = 0.0;
  const void* alpha = t.scale == CUDA_R_64F ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = t.scale == CUDA_R_64F ? static_cast<const void*>(&zero_d) : &zero_f;
  bool epilogue_done = true;
  for (const GemmRun& run : g.runs) {
    const char* pa = static_cast<const char*>(a) + run.a_offset * static_cast<int64_t>(elem);
    const char* pb = static_cast<const char*>(b) + run.b_offset * static_cast<int64_t>(elem);
    char* pc = static_cast<char*>(c) + run.c_offset * static_cast<int64_t>(elem);
    PlanKey key;
    key.device = cu.device;
    key.dtype = dtype;
    key.epilogue = wanted;
    key.ta = g.ta;
    key.tb = g.tb;
    key.m = g.m;
    key.n = g.n;
    key.k = g.k;
    key.lda = g.lda;
    key.ldb = g.ldb;
    key.count = run.count;
    key.a_stride = run.count > 1 ? run.a_stride : 0;
    key.b_stride = run.count > 1 ? run.b_stride : 0;
    key.c_stride = run.count > 1 ? run.c_stride : 0;
    const int64_t e = static_cast<int64_t>(elem);
    key.align_a = alignment_of(reinterpret_cast<uintptr_t>(pa), run.a_stride * e, run.count);
    key.align_b = alignment_of(reinterpret_cast<uintptr_t>(pb), run.b_stride * e, run.count);
    key.align_c = alignment_of(reinterpret_cast<uintptr_t>(pc), run.c_stride * e, run.count);
    std::shared_ptr<const Plan> plan = plan_cache().get(ctx, cu, key, g, bias);
    if (plan->plain) {
      launch_plain_gemm(dtype, g, run, a, b, c, cu.stream);
      check_launch(ctx);
      epilogue_done = false;
      continue;
    }
    const LtEpilogue used = plan->with_epilogue ? wanted : LtEpilogue::kNone;
    epilogue_done = used != LtEpilogue::kNone;
    cublasLtMatmulDescOpaque_t desc;
    init_desc(ctx, desc, t, key, used, bias);
    // cuBLASLt's A is weft's B and its B weft's A: C^T = op(B)^T op(A)^T.
    check_lt(cublasLtMatmul(cu.lt, &desc, alpha, pb, &plan->a, pa, &plan->b, beta, pc, &plan->c, pc, &plan->c,
                            &plan->algo, cu.workspace, cu.workspace_bytes, cu.stream),
             ctx, "cublasLtMatmul");
  }
  // FusedMatMul has one run: whatever cuBLASLt did not do is done here.
  const bool need_bias = bias && !epilogue_done;
  if (need_bias || act != Activation::kNone) {
    launch_bias_activation(dtype, c, need_bias ? bias : nullptr, rows, g.n, act, cu.stream);
    check_launch(ctx);
  }
}

void matmul_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& c = ctx.output(0);
  const GemmGeometry g = matmul_geometry(a.shape(), b.shape(), c.shape(), ctx.attrs.get_or<bool>("transpose_a", false),
                                         ctx.attrs.get_or<bool>("transpose_b", false));
  run_gemm(ctx, c.dtype(), g, raw_data(a), raw_data(b), raw_data(c), nullptr, Activation::kNone);
}

Activation parse_activation(const KernelContext& ctx) {
  const AttrValue* v = ctx.attrs.find("activation");
  const std::string* s = v ? std::get_if<std::string>(v) : nullptr;
  if (!s || s->empty()) return Activation::kNone;
  if (*s == "relu") return Activation::kRelu;
  if (*s == "sigmoid") return Activation::kSigmoid;
  if (*s == "tanh") return Activation::kTanh;
  ctx.fail("unknown activation '" + *s + "'");
}

void fused_matmul_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor& bias = ctx.input(2);
  Tensor& c = ctx.output(0);
  const GemmGeometry g = fused_matmul_geometry(a.shape(), b.shape(), c.shape(),
                                               ctx.attrs.get_or<bool>("transpose_a", false),
                                               ctx.attrs.get_or<bool>("transpose_b", false));
  if (ctx.attrs.get_or<std::string>("activation", "") == "relu_grad") {
    // ReluGrad(A B, x): the product, then the mask over C (the third input is x, C's shape).
    const Tensor& x = bias;
    if (x.shape() != c.shape())
      ctx.fail("relu_grad's x has shape " + x.shape().to_string() + "; the output has shape " + c.shape().to_string());
    run_gemm(ctx, c.dtype(), g, raw_data(a), raw_data(b), raw_data(c), nullptr, Activation::kNone);
    launch_relu_grad_mask(c.dtype(), raw_data(c), raw_data(x), c.size(), cuda_context(ctx).stream);
    check_launch(ctx);
    return;
  }
  const Activation act = parse_activation(ctx);
  if (bias.size() != g.n)
    ctx.fail("bias has " + std::to_string(bias.size()) + " elements; the output has " + std::to_string(g.n) +
             " columns");
  run_gemm(ctx, c.dtype(), g, raw_data(a), raw_data(b), raw_data(c), raw_data(bias), act);
}

}  // namespace

void register_matmul_kernels() {
  for (DType t : {float32, float64, float16, bfloat16, int32, int64})
    register_kernel("MatMul", DeviceType::CUDA, t, matmul_kernel);
  for (DType t : {float32, float64, float16, bfloat16})
    register_kernel("FusedMatMul", DeviceType::CUDA, t, fused_matmul_kernel);
}

}  // namespace weft::cuda
