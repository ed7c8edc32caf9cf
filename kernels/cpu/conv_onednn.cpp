#include "kernels/cpu/conv_onednn.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/channel_blocks.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "runtime/allocator.h"

namespace weft::cpu {

namespace {

using dnnl::memory;

enum class Pass { kForward, kBackwardData, kBackwardWeights };

// Everything a primitive depends on.
struct Key {
  Pass pass;
  std::array<int64_t, 10> dims;   // n h w c kh kw f oh ow groups
  std::array<int64_t, 8> window;  // strides, dilations, pads top bottom left right
  auto tie() const { return std::tie(pass, dims, window); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

// One tensor the primitive reads or writes: in weft's layout (`user`) and in the one the
// primitive chose (`inner`), with the reorder between them when they differ (user to inner for
// an input, inner to user for the output).
struct Operand {
  int arg = 0;  // DNNL_ARG_*
  memory::desc user, inner;
  dnnl::primitive convert;
  size_t convert_scratch = 0;
  int own_block = 0;  // 8 or 16: converted by channel_blocks.h's copies instead of `convert`
  bool converted() const { return user != inner; }
};

struct Entry {
  dnnl::primitive primitive;
  size_t scratchpad_bytes = 0;  // the largest scratchpad of the primitive and its reorders
  std::vector<Operand> inputs;  // the output's reorder runs after the primitive
  Operand output;
  bool usable = false;  // false: oneDNN offers only its reference; weft's runs instead
  std::string impl;     // oneDNN's name for the implementation, "jit:avx2" say
};

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// oneDNN's "ref:" implementations are plain loops, slower than weft's im2col and GEMM.
bool worth_using(const dnnl::primitive_desc_base& pd) {
  const char* impl = pd.impl_info_str();
  return impl && std::strncmp(impl, "ref", 3) != 0;
}

struct Descs {
  memory::desc src, weights, dst;
  memory::dims strides, dilates, pad_l, pad_r;
};

// The filter in oneDNN's logical order: O I H W, or for a grouped (depthwise) convolution
// G O/G I/G H W. `plain` names weft's [kh, kw, in, out] layout (hwio; hwigo with groups, the same
// bytes: out = g * O/G + o), or is format_tag::any.
memory::desc filter_desc(const ConvParams& p, memory::format_tag plain) {
  const auto f32 = memory::data_type::f32;
  if (p.groups <= 1) return memory::desc({p.f, p.c, p.kh, p.kw}, f32, plain);
  const auto tag = plain == memory::format_tag::any ? plain : memory::format_tag::hwigo;
  return memory::desc({p.groups, p.f / p.groups, p.c / p.groups, p.kh, p.kw}, f32, tag);
}

// Logical dims in oneDNN's order (N C H W, O I H W). Weft's layouts are NHWC images and
// [kh, kw, in, out] filters. An image of one channel is the same bytes as NCHW, and the forward
// pass describes it so: oneDNN's first-layer kernel reads it directly (LeNet's 1->6 layer: 0.70 ms
// against 0.85 on its NHWC kernel). The backward passes describe it as NHWC: on NCHW, oneDNN's
// kernels want the other operand in 16-channel blocks (6 channels padded to 16, copied in and
// out), and its NHWC kernels read weft's tensors as they are (the filter gradient 0.77 -> 0.59 ms,
// the input gradient 7.3 -> 2.4 ms).
Descs user_descs(const ConvParams& p, Pass pass) {
  const auto f32 = memory::data_type::f32;
  auto image = [pass](int64_t channels) {
    return channels == 1 && pass == Pass::kForward ? memory::format_tag::nchw : memory::format_tag::nhwc;
  };
  return {memory::desc({p.n, p.c, p.h, p.w}, f32, image(p.c)), filter_desc(p, memory::format_tag::hwio),
          memory::desc({p.n, p.f, p.oh, p.ow}, f32, image(p.f)),
          {p.win.stride_h, p.win.stride_w},
          {p.win.dilation_h - 1, p.win.dilation_w - 1},  // oneDNN counts the gaps: 0 is undilated
          {p.g.pad_top, p.g.pad_left},
          {p.g.pad_bottom, p.g.pad_right}};
}

// The layouts a primitive is asked for, in order of preference.
enum class Layouts {
  kWeftImages,  // NHWC images as they are, the filter's layout left to oneDNN
  kAll,         // every layout left to oneDNN
};

// The same problem with the filter's layout (and, for kAll, the images') left to oneDNN. On x86
// its direct JIT kernels read NHWC images but want blocked filters (OIhw8i8o on AVX2); given
// weft's [kh, kw, in, out] filter it falls back to im2col and GEMM, two to six times slower for a
// network's 3x3 layers. A filter is small, so reordering it per call costs little; the images,
// reordered too under kAll (nChw8c), are where oneDNN has no direct kernel for NHWC.
Descs wanted_descs(const ConvParams& p, Pass pass, Layouts layouts) {
  Descs d = user_descs(p, pass);
  const auto any = memory::format_tag::any;
  const auto f32 = memory::data_type::f32;
  d.weights = filter_desc(p, any);
  if (layouts == Layouts::kAll) {
    d.src = memory::desc({p.n, p.c, p.h, p.w}, f32, any);
    d.dst = memory::desc({p.n, p.f, p.oh, p.ow}, f32, any);
  }
  return d;
}

dnnl::primitive_attr user_scratchpad() {
  // The scratchpad comes with each call, so concurrent calls of one cached primitive share none.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// The block when `user` is an NHWC image (or one channel's NCHW, the same bytes) and `inner` the
// same image in aBcd8b or aBcd16b with a partial last block: channel_blocks.h converts those.
int own_block(const memory::desc& user, const memory::desc& inner) {
  const memory::dims d = user.dims();
  const auto f32 = memory::data_type::f32;
  if (d.size() != 4) return 0;
  const bool nhwc = user == memory::desc(d, f32, memory::format_tag::nhwc) ||
                    (d[1] == 1 && user == memory::desc(d, f32, memory::format_tag::nchw));
  if (!nhwc) return 0;
  if (d[1] % 16 != 0 && inner == memory::desc(d, f32, memory::format_tag::aBcd16b)) return 16;
  if (d[1] % 8 != 0 && inner == memory::desc(d, f32, memory::format_tag::aBcd8b)) return 8;
  return 0;
}

// An operand whose layout the primitive chose; `into_inner` for inputs.
Operand operand(int arg, const memory::desc& user, const memory::desc& inner, bool into_inner) {
  Operand o{arg, user, inner, {}, 0, own_block(user, inner)};
  if (!o.converted() || o.own_block) return o;
  dnnl::engine& e = cpu_engine();
  const dnnl::reorder::primitive_desc pd = into_inner ? dnnl::reorder::primitive_desc(e, user, e, inner, user_scratchpad())
                                                      : dnnl::reorder::primitive_desc(e, inner, e, user, user_scratchpad());
  o.convert = dnnl::reorder(pd);
  o.convert_scratch = pd.scratchpad_desc().get_size();
  return o;
}

template <class Primitive, class PD>
void finish(Entry& e, const PD& pd, std::vector<Operand> inputs, Operand output) {
  e.usable = worth_using(pd);
  e.impl = pd.impl_info_str() ? pd.impl_info_str() : "";
  e.scratchpad_bytes = pd.scratchpad_desc().get_size();
  for (const Operand& o : inputs) e.scratchpad_bytes = std::max(e.scratchpad_bytes, o.convert_scratch);
  e.scratchpad_bytes = std::max(e.scratchpad_bytes, output.convert_scratch);
  e.inputs = std::move(inputs);
  e.output = std::move(output);
  e.primitive = Primitive(pd);
}

Entry make_entry(Pass pass, const ConvParams& p, Layouts layouts) {
  const Descs u = user_descs(p, pass);
  const Descs d = wanted_descs(p, pass, layouts);
  const auto algo = dnnl::algorithm::convolution_direct;
  Entry e;
  try {
    const dnnl::convolution_forward::desc fwd(dnnl::prop_kind::forward_training, algo, d.src, d.weights, d.dst,
                                              d.strides, d.dilates, d.pad_l, d.pad_r);
    const dnnl::convolution_forward::primitive_desc fwd_pd(fwd, user_scratchpad(), cpu_engine());
    if (pass == Pass::kForward) {
      finish<dnnl::convolution_forward>(e, fwd_pd,
                                        {operand(DNNL_ARG_SRC, u.src, fwd_pd.src_desc(), true),
                                         operand(DNNL_ARG_WEIGHTS, u.weights, fwd_pd.weights_desc(), true)},
                                        operand(DNNL_ARG_DST, u.dst, fwd_pd.dst_desc(), false));
    } else if (pass == Pass::kBackwardData) {
      const dnnl::convolution_backward_data::desc bwd(algo, d.src, d.weights, d.dst, d.strides, d.dilates, d.pad_l,
                                                      d.pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(bwd, user_scratchpad(), cpu_engine(), fwd_pd);
      finish<dnnl::convolution_backward_data>(e, pd,
             {operand(DNNL_ARG_WEIGHTS, u.weights, pd.weights_desc(), true),
              operand(DNNL_ARG_DIFF_DST, u.dst, pd.diff_dst_desc(), true)},
             operand(DNNL_ARG_DIFF_SRC, u.src, pd.diff_src_desc(), false));
    } else {
      const dnnl::convolution_backward_weights::desc bwd(algo, d.src, d.weights, d.dst, d.strides, d.dilates,
                                                         d.pad_l, d.pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(bwd, user_scratchpad(), cpu_engine(), fwd_pd);
      finish<dnnl::convolution_backward_weights>(e, pd,
             {operand(DNNL_ARG_SRC, u.src, pd.src_desc(), true),
              operand(DNNL_ARG_DIFF_DST, u.dst, pd.diff_dst_desc(), true)},
             operand(DNNL_ARG_DIFF_WEIGHTS, u.weights, pd.diff_weights_desc(), false));
    }
  } catch (const dnnl::error&) {
    e = Entry{};  // no implementation for this problem: weft's reference computes it
  }
  return e;
}

// Which kernel, decided by oneDNN's dispatch for the problem and the CPU and by the channel
// counts, never by timing. Layers of 64 channels and more in and out take oneDNN's blocked
// images: its kernels run 10-20 % faster on them, more than the reorders cost (a 3x3 64->64
// layer's three passes went from 80 to 100-115 GFLOP/s here). Smaller layers take its direct
// kernel on weft's NHWC images (LeNet's first layers were 10 % slower with the reorders), and so
// do depthwise ones at any width: a depthwise pass is memory-bound, and oneDNN reads NHWC directly
// (its "brdgmm_dw" forward, "jit_dw" gradients), where the reorders in and out per chunk had made
// a [32, 56, 56, 64] forward pass 4.0 ms instead of 1.0 (libtorch 1.2). Where the preferred one is
// missing, the other; where neither is a direct kernel, any real one.
Entry choose_entry(Pass pass, const ConvParams& p) {
  auto direct = [](const Entry& e) {
    if (!e.usable) return false;
    for (const char* prefix : {"jit", "brg", "brdgmm"})
      if (e.impl.rfind(prefix, 0) == 0) return true;
    return false;
  };
  const bool wide = p.groups == 1 && p.c >= 64 && p.f >= 64;
  Entry first = make_entry(pass, p, wide ? Layouts::kAll : Layouts::kWeftImages);
  if (direct(first)) return first;
  Entry second = make_entry(pass, p, wide ? Layouts::kWeftImages : Layouts::kAll);
  if (direct(second) || !first.usable) return second;
  return first;
}

// Primitives per problem, made once: a layer's shapes repeat every step. Bounded: a program that
// feeds ever new shapes starts again from empty rather than grow.
class PrimitiveCache {
 public:
  std::shared_ptr<const Entry> get(Pass pass, const ConvParams& p) {
    const Key key{pass,
                  {p.n, p.h, p.w, p.c, p.kh, p.kw, p.f, p.oh, p.ow, p.groups},
                  {p.win.stride_h, p.win.stride_w, p.win.dilation_h, p.win.dilation_w, p.g.pad_top, p.g.pad_bottom,
                   p.g.pad_left, p.g.pad_right}};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    }
    // Made outside the lock (oneDNN's JIT takes milliseconds); two threads may both make one.
    auto entry = std::make_shared<const Entry>(choose_entry(pass, p));
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= kMaxEntries) entries_.clear();
    return entries_.emplace(key, entry).first->second;
  }

 private:
  static constexpr size_t kMaxEntries = 256;
  std::mutex mu_;
  std::map<Key, std::shared_ptr<const Entry>> entries_;
};

PrimitiveCache& cache() {
  static PrimitiveCache c;
  return c;
}

size_t round_up(size_t b) { return (b + 63) / 64 * 64; }

// Memory of one task's own, 64-byte aligned, from weft's CPU allocator (whose cached blocks spare
// each call the page faults of fresh memory): handed out in order by take().
class TaskBuffer {
 public:
  explicit TaskBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_) data_ = static_cast<uint8_t*>(CpuAllocator::instance().allocate(bytes_));
  }
  ~TaskBuffer() {
    if (data_) CpuAllocator::instance().deallocate(data_, bytes_);
  }
  TaskBuffer(const TaskBuffer&) = delete;
  TaskBuffer& operator=(const TaskBuffer&) = delete;
  void* take(size_t bytes) {
    void* at = data_ + next_;
    next_ += round_up(bytes);
    return at;
  }

 private:
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0, next_ = 0;
};

// The batch is cut into chunks of images, fixed by the problem's shape alone: at least
// kMinChunks (so the pool has work for several threads), more for a large problem, each of at least
// kChunkFlops, up to kMaxChunks. A oneDNN call has a fixed cost (its setup, and the reorders of
// its images into and out of the primitive's layout), so chunks much smaller than kChunkFlops
// cost more than they balance: ResNet-20's step took 78 ms with chunks of 4 MFLOP (2 images of a
// 64-channel 8x8 layer) and 68 ms with chunks of 8 images, on two cores. The count may not follow
// the machine's cores (the filter gradient's partial sums would then give other bits elsewhere),
// so a machine of more than kMinChunks cores leaves some idle on a small layer.
constexpr int64_t kMinChunks = 8;
constexpr int64_t kMaxChunks = 32;
constexpr double kChunkFlops = 32e6;

struct Chunks {
  int64_t per = 0, count = 0;  // images per chunk (the last may have fewer), chunks
};
Chunks chunks_of(const ConvParams& p) {
  const double per_image = 2.0 * p.oh * p.ow * p.kh * p.kw * p.group_in() * p.f;
  const auto by_work = static_cast<int64_t>(per_image * static_cast<double>(p.n) / kChunkFlops);
  const int64_t count = std::min({p.n, kMaxChunks, std::max(kMinChunks, by_work)});
  const int64_t per = (p.n + count - 1) / count;
  return {per, (p.n + per - 1) / per};
}

// Elements of one image of the operand `arg` in weft's layout: 0 for the filter, shared by all.
int64_t per_image(int arg, const ConvParams& p) {
  if (arg == DNNL_ARG_SRC || arg == DNNL_ARG_DIFF_SRC) return p.h * p.w * p.c;
  if (arg == DNNL_ARG_DST || arg == DNNL_ARG_DIFF_DST) return p.oh * p.ow * p.f;
  return 0;
}

// One chunk's problem and its primitive, with the filter (an input of the forward and
// backward-data passes) in the primitive's layout, reordered once for every chunk.
struct ChunkPlan {
  ConvParams p;
  std::shared_ptr<const Entry> e;
  const void* filter = nullptr;  // the filter as the primitive reads it, when it is an input
};

// oneDNN's memory objects take non-const pointers; the inputs are only read.
memory mem(const memory::desc& md, const void* ptr) { return memory(md, cpu_engine(), const_cast<void*>(ptr)); }

// Converts an image operand between weft's layout and the primitive's: oneDNN's reorder, or
// channel_blocks.h's copies where own_block says.
void convert_image(const Operand& o, bool into_inner, const memory& user, const memory& inner, dnnl::stream& stream,
                   const std::function<std::unordered_map<int, memory>(std::unordered_map<int, memory>)>& with_scratch) {
  if (!o.own_block) {
    o.convert.execute(stream, with_scratch({{DNNL_ARG_FROM, into_inner ? user : inner},
                                            {DNNL_ARG_TO, into_inner ? inner : user}}));
    return;
  }
  stream.wait();  // the copies run here, after what the stream has queued
  const memory::dims d = o.user.dims();
  const int64_t n = d[0], c = d[1], hw = d[2] * d[3];
  auto* u = static_cast<float*>(user.get_data_handle());
  auto* i = static_cast<float*>(inner.get_data_handle());
  if (into_inner) nhwc_to_channel_blocks(u, i, n, hw, c, o.own_block);
  else channel_blocks_to_nhwc(i, u, n, hw, c, o.own_block);
}

// Runs plan's primitive on images [first, first + plan.p.n): reorders its image operands in and
// its result out where the primitive's layouts differ from weft's. `out` is the whole output
// (this chunk writes its images), or, for the filter gradient, this chunk's own partial sum.
void run_chunk(const ChunkPlan& plan, int64_t first, const ConvParams& full, const float* given[2], float* out,
               const OutputRows& epilogue) {
  const Entry& e = *plan.e;
  size_t bytes = round_up(e.scratchpad_bytes);
  for (const Operand& o : e.inputs)
    if (o.converted() && per_image(o.arg, full) > 0) bytes += round_up(o.inner.get_size());
  if (e.output.converted()) bytes += round_up(e.output.inner.get_size());
  TaskBuffer buffer(bytes);
  dnnl::stream stream(cpu_engine());
  memory scratch;
  if (e.scratchpad_bytes)
    scratch = mem(memory::desc({static_cast<memory::dim>(e.scratchpad_bytes)}, memory::data_type::u8,
                               memory::format_tag::x),
                  buffer.take(e.scratchpad_bytes));
  auto with_scratch = [&](std::unordered_map<int, memory> args) -> std::unordered_map<int, memory> {
    if (e.scratchpad_bytes) args.emplace(DNNL_ARG_SCRATCHPAD, scratch);
    return args;
  };
  std::unordered_map<int, memory> args;
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const Operand& o = e.inputs[i];
    const int64_t image = per_image(o.arg, full);
    if (image == 0) {  // the filter: already in the primitive's layout
      args.emplace(o.arg, mem(o.converted() ? o.inner : o.user, o.converted() ? plan.filter : given[i]));
      continue;
    }
    const memory user = mem(o.user, given[i] + first * image);
    if (!o.converted()) {
      args.emplace(o.arg, user);
      continue;
    }
    const memory inner = mem(o.inner, buffer.take(o.inner.get_size()));
    convert_image(o, true, user, inner, stream, with_scratch);
    args.emplace(o.arg, inner);
  }
  const memory user_out = mem(e.output.user, out + first * per_image(e.output.arg, full));
  const memory inner_out =
      e.output.converted() ? mem(e.output.inner, buffer.take(e.output.inner.get_size())) : user_out;
  args.emplace(e.output.arg, inner_out);
  e.primitive.execute(stream, with_scratch(std::move(args)));
  if (e.output.converted()) convert_image(e.output, false, user_out, inner_out, stream, with_scratch);
  stream.wait();
  if (epilogue) epilogue(out, first * full.oh * full.ow, (first + plan.p.n) * full.oh * full.ow);
}

bool run(Pass pass, ThreadPool& pool, const ConvParams& p, const float* a, const float* b, float* out,
         const OutputRows& epilogue = {}) {
  // oneDNN's problem descriptions want every dimension at least 1; empty problems are the
  // reference's (it fills zeros or does nothing).
  if (p.n < 1 || p.c < 1 || p.f < 1 || p.h < 1 || p.w < 1) return false;
  // oneDNN single-threaded in every task: weft's pool runs the chunks. OpenMP's thread count is a
  // per-thread setting; the caller's is given back (other OpenMP code may share its thread).
  const int caller_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  struct Restore {
    int threads;
    ~Restore() { omp_set_num_threads(threads); }
  } restore{caller_threads};
  const Chunks chunks = chunks_of(p);
  const int64_t last_n = p.n - (chunks.count - 1) * chunks.per;
  std::vector<ChunkPlan> plans;  // [0]: a whole chunk's, [1]: a shorter last chunk's
  for (int64_t n : {chunks.per, last_n}) {
    if (!plans.empty() && n == plans[0].p.n) break;
    ConvParams q = p;
    q.n = n;
    plans.push_back({q, cache().get(pass, q), nullptr});
    if (!plans.back().e->usable) return false;
  }
  const float* given[2] = {a, b};  // the inputs in Entry::inputs' order
  // The filter, when it is an input, in each plan's layout, once for every chunk.
  size_t filter_bytes = 0;
  for (const ChunkPlan& plan : plans)
    for (const Operand& o : plan.e->inputs)
      if (o.converted() && per_image(o.arg, p) == 0)
        filter_bytes += round_up(o.inner.get_size()) + round_up(o.convert_scratch);
  TaskBuffer filters(filter_bytes);
  for (ChunkPlan& plan : plans)
    for (size_t i = 0; i < plan.e->inputs.size(); ++i) {
      const Operand& o = plan.e->inputs[i];
      if (!o.converted() || per_image(o.arg, p) != 0) continue;
      const memory inner = mem(o.inner, filters.take(o.inner.get_size()));
      std::unordered_map<int, memory> args{{DNNL_ARG_FROM, mem(o.user, given[i])}, {DNNL_ARG_TO, inner}};
      if (o.convert_scratch)
        args.emplace(DNNL_ARG_SCRATCHPAD, mem(memory::desc({static_cast<memory::dim>(o.convert_scratch)},
                                                           memory::data_type::u8, memory::format_tag::x),
                                              filters.take(o.convert_scratch)));
      dnnl::stream stream(cpu_engine());
      o.convert.execute(stream, args);
      stream.wait();
      plan.filter = inner.get_data_handle();
    }
  // The filter gradient: each chunk's partial sum apart, then added in chunk order, so the bits
  // depend on the shape alone, not on the thread count.
  const bool partial_sums = pass == Pass::kBackwardWeights && chunks.count > 1;
  const int64_t filter_elems = p.kh * p.kw * p.group_in() * p.f;
  TaskBuffer partials(partial_sums ? static_cast<size_t>(chunks.count * filter_elems) * sizeof(float) : 0);
  float* partial = partial_sums ? static_cast<float*>(partials.take(0)) : nullptr;
  pool.parallel_for(chunks.count, 1, [&](int64_t begin, int64_t end) {
    omp_set_num_threads(1);
    for (int64_t c = begin; c < end; ++c) {
      const ChunkPlan& plan = c + 1 < chunks.count || plans.size() == 1 ? plans[0] : plans[1];
      run_chunk(plan, c * chunks.per, p, given, partial_sums ? partial + c * filter_elems : out, epilogue);
    }
  });
  if (partial_sums)
    pool.parallel_for(filter_elems, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        float sum = partial[i];
        for (int64_t c = 1; c < chunks.count; ++c) sum += partial[c * filter_elems + i];
        out[i] = sum;
      }
    });
  return true;
}

}  // namespace

bool onednn_conv2d(ThreadPool& pool, const ConvParams& p, const float* x, const float* filter, float* y,
                   const OutputRows& epilogue) {
  return run(Pass::kForward, pool, p, x, filter, y, epilogue);
}

bool onednn_conv2d_backprop_input(ThreadPool& pool, const ConvParams& p, const float* filter, const float* dy,
                                  float* dx) {
  return run(Pass::kBackwardData, pool, p, filter, dy, dx);
}

bool onednn_conv2d_backprop_filter(ThreadPool& pool, const ConvParams& p, const float* x, const float* dy,
                                   float* dfilter) {
  return run(Pass::kBackwardWeights, pool, p, x, dy, dfilter);
}

}  // namespace weft::cpu
