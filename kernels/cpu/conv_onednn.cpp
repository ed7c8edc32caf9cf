#include "kernels/cpu/conv_onednn.h"

#include <omp.h>

#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "runtime/allocator.h"

namespace weft::cpu {

namespace {

using dnnl::memory;

enum class Pass { kForward, kBackwardData, kBackwardWeights };

// Everything a primitive depends on.
struct Key {
  Pass pass;
  std::array<int64_t, 9> dims;    // n h w c kh kw f oh ow
  std::array<int64_t, 8> window;  // strides, dilations, pads top bottom left right
  bool bias;
  bool relu;
  int threads;
  auto tie() const { return std::tie(pass, dims, window, bias, relu, threads); }
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
  bool converted() const { return user != inner; }
};

struct Entry {
  dnnl::primitive primitive;
  size_t scratchpad_bytes = 0;  // the largest scratchpad of the primitive and its reorders
  std::vector<Operand> inputs;  // the output's reorder runs after the primitive
  Operand output;
  bool usable = false;  // false: oneDNN offers only its reference; weft's runs instead
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

// Logical dims in oneDNN's order (N C H W, O I H W). Weft's layouts are NHWC images and
// [kh, kw, in, out] filters; an image of one channel is the same bytes as NCHW, which oneDNN's
// first-layer kernels read directly, so it is described that way and needs no reorder.
Descs user_descs(const ConvParams& p) {
  const auto f32 = memory::data_type::f32;
  auto image = [](int64_t channels) {
    return channels == 1 ? memory::format_tag::nchw : memory::format_tag::nhwc;
  };
  return {memory::desc({p.n, p.c, p.h, p.w}, f32, image(p.c)),
          memory::desc({p.f, p.c, p.kh, p.kw}, f32, memory::format_tag::hwio),
          memory::desc({p.n, p.f, p.oh, p.ow}, f32, image(p.f)),
          {p.win.stride_h, p.win.stride_w},
          {p.win.dilation_h - 1, p.win.dilation_w - 1},  // oneDNN counts the gaps: 0 is undilated
          {p.g.pad_top, p.g.pad_left},
          {p.g.pad_bottom, p.g.pad_right}};
}

// The same problem with every layout left to oneDNN: on x86 it picks its blocked formats
// (nChw8c on AVX2, nChw16c on AVX-512), for which its direct JIT kernels exist; with weft's NHWC
// it falls back to im2col and GEMM, two to six times slower for a network's 3x3 layers.
Descs any_descs(const ConvParams& p) {
  Descs d = user_descs(p);
  const auto any = memory::format_tag::any;
  const auto f32 = memory::data_type::f32;
  d.src = memory::desc({p.n, p.c, p.h, p.w}, f32, any);
  d.weights = memory::desc({p.f, p.c, p.kh, p.kw}, f32, any);
  d.dst = memory::desc({p.n, p.f, p.oh, p.ow}, f32, any);
  return d;
}

dnnl::primitive_attr user_scratchpad() {
  // The scratchpad comes with each call, so concurrent calls of one cached primitive share none.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// An operand whose layout the primitive chose; `into_inner` for inputs.
Operand operand(int arg, const memory::desc& user, const memory::desc& inner, bool into_inner) {
  Operand o{arg, user, inner, {}, 0};
  if (!o.converted()) return o;
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
  e.scratchpad_bytes = pd.scratchpad_desc().get_size();
  for (const Operand& o : inputs) e.scratchpad_bytes = std::max(e.scratchpad_bytes, o.convert_scratch);
  e.scratchpad_bytes = std::max(e.scratchpad_bytes, output.convert_scratch);
  e.inputs = std::move(inputs);
  e.output = std::move(output);
  e.primitive = Primitive(pd);
}

Entry make_entry(Pass pass, const ConvParams& p, bool bias, bool relu) {
  const Descs u = user_descs(p);
  const Descs d = any_descs(p);
  const auto algo = dnnl::algorithm::convolution_direct;
  dnnl::primitive_attr attr = user_scratchpad();
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  const memory::desc bias_desc({p.f}, memory::data_type::f32, memory::format_tag::x);
  Entry e;
  try {
    const auto fwd = bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, d.src, d.weights,
                                                            bias_desc, d.dst, d.strides, d.dilates, d.pad_l, d.pad_r)
                          : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, d.src, d.weights,
                                                            d.dst, d.strides, d.dilates, d.pad_l, d.pad_r);
    const dnnl::convolution_forward::primitive_desc fwd_pd(fwd, attr, cpu_engine());
    if (pass == Pass::kForward) {
      std::vector<Operand> in{operand(DNNL_ARG_SRC, u.src, fwd_pd.src_desc(), true),
                              operand(DNNL_ARG_WEIGHTS, u.weights, fwd_pd.weights_desc(), true)};
      if (bias) in.push_back(operand(DNNL_ARG_BIAS, bias_desc, fwd_pd.bias_desc(), true));
      finish<dnnl::convolution_forward>(e, fwd_pd, std::move(in), operand(DNNL_ARG_DST, u.dst, fwd_pd.dst_desc(), false));
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

// Primitives per problem and thread count, made once: a layer's shapes repeat every step.
// Bounded: a program that feeds ever new shapes starts again from empty rather than grow.
class PrimitiveCache {
 public:
  std::shared_ptr<const Entry> get(const Key& key, const ConvParams& p) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    }
    // Made outside the lock (oneDNN's JIT takes milliseconds); two threads may both make one.
    auto entry = std::make_shared<const Entry>(make_entry(key.pass, p, key.bias, key.relu));
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

// One call's own memory: the scratchpad, then each reordered operand, each 64-byte aligned. From
// weft's CPU allocator, whose cached blocks spare each call the page faults of fresh memory.
class CallBuffer {
 public:
  explicit CallBuffer(const Entry& e) {
    bytes_ = round_up(e.scratchpad_bytes);
    for (const Operand& o : e.inputs) bytes_ += o.converted() ? round_up(o.inner.get_size()) : 0;
    bytes_ += e.output.converted() ? round_up(e.output.inner.get_size()) : 0;
    if (bytes_) data_ = static_cast<uint8_t*>(CpuAllocator::instance().allocate(bytes_));
    next_ = round_up(e.scratchpad_bytes);
  }
  ~CallBuffer() {
    if (data_) CpuAllocator::instance().deallocate(data_, bytes_);
  }
  CallBuffer(const CallBuffer&) = delete;
  CallBuffer& operator=(const CallBuffer&) = delete;
  uint8_t* scratchpad() { return data_; }
  void* take(const memory::desc& md) {
    void* at = data_ + next_;
    next_ += round_up(md.get_size());
    return at;
  }

 private:
  static size_t round_up(size_t b) { return (b + 63) / 64 * 64; }
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0, next_ = 0;
};

bool run(Pass pass, ThreadPool& pool, const ConvParams& p, const float* a, const float* b, const float* bias,
         bool relu, float* out) {
  // oneDNN's problem descriptions want every dimension at least 1; empty problems are the
  // reference's (it fills zeros or does nothing).
  if (p.n < 1 || p.c < 1 || p.f < 1 || p.h < 1 || p.w < 1) return false;
  const int threads = ThreadPool::in_worker() ? 1 : pool.num_threads();
  omp_set_num_threads(threads);
  const Key key{pass,
                {p.n, p.h, p.w, p.c, p.kh, p.kw, p.f, p.oh, p.ow},
                {p.win.stride_h, p.win.stride_w, p.win.dilation_h, p.win.dilation_w, p.g.pad_top, p.g.pad_bottom,
                 p.g.pad_left, p.g.pad_right},
                bias != nullptr,
                relu,
                threads};
  const std::shared_ptr<const Entry> e = cache().get(key, p);
  if (!e->usable) return false;
  dnnl::engine& engine = cpu_engine();
  dnnl::stream stream(engine);
  CallBuffer buffer(*e);
  // oneDNN's memory objects take non-const pointers; the inputs are only read.
  auto mem = [&](const memory::desc& md, const void* ptr) { return memory(md, engine, const_cast<void*>(ptr)); };
  memory scratch;
  if (e->scratchpad_bytes)
    scratch = mem(memory::desc({static_cast<memory::dim>(e->scratchpad_bytes)}, memory::data_type::u8,
                               memory::format_tag::x),
                  buffer.scratchpad());
  auto with_scratch = [&](std::unordered_map<int, memory> args) {
    if (e->scratchpad_bytes) args.emplace(DNNL_ARG_SCRATCHPAD, scratch);
    return args;
  };
  const float* given[3] = {a, b, bias};  // the inputs in Entry::inputs' order
  std::unordered_map<int, memory> args;
  for (size_t i = 0; i < e->inputs.size(); ++i) {
    const Operand& o = e->inputs[i];
    const memory user = mem(o.user, given[i]);
    if (!o.converted()) {
      args.emplace(o.arg, user);
      continue;
    }
    const memory inner = mem(o.inner, buffer.take(o.inner));
    o.convert.execute(stream, with_scratch({{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, inner}}));
    args.emplace(o.arg, inner);
  }
  const memory user_out = mem(e->output.user, out);
  const memory inner_out = e->output.converted() ? mem(e->output.inner, buffer.take(e->output.inner)) : user_out;
  args.emplace(e->output.arg, inner_out);
  e->primitive.execute(stream, with_scratch(std::move(args)));
  if (e->output.converted())
    e->output.convert.execute(stream, with_scratch({{DNNL_ARG_FROM, inner_out}, {DNNL_ARG_TO, user_out}}));
  stream.wait();
  return true;
}

}  // namespace

bool onednn_conv2d(ThreadPool& pool, const ConvParams& p, const float* x, const float* filter, float* y,
                   const float* bias, bool relu) {
  return run(Pass::kForward, pool, p, x, filter, bias, relu, y);
}

bool onednn_conv2d_backprop_input(ThreadPool& pool, const ConvParams& p, const float* filter, const float* dy,
                                  float* dx) {
  return run(Pass::kBackwardData, pool, p, filter, dy, nullptr, false, dx);
}

bool onednn_conv2d_backprop_filter(ThreadPool& pool, const ConvParams& p, const float* x, const float* dy,
                                   float* dfilter) {
  return run(Pass::kBackwardWeights, pool, p, x, dy, nullptr, false, dfilter);
}

}  // namespace weft::cpu
