#include "runtime/pending_value.h"

#include <algorithm>
#include <utility>

#include "runtime/tensor.h"
#include "runtime/tensor_internals.h"
#include "runtime/thread_pool.h"

namespace weft {

std::atomic<int64_t> g_pending_values{0};

namespace {

// Every pending tensor not yet computed, held by a reference: one that only this list holds
// (ref_count 1) can never be read, so it is dropped instead of computed. Holding references keeps
// the list's entries alive while a thread computes them with no lock held.
std::mutex g_list_mu;
std::vector<IntrusivePtr<TensorImpl>> g_list;
// The list is pruned when it holds twice what was kept at the last pruning: a program making many
// pending tensors before its next kernel costs amortised O(1) per tensor, not O(n), and the dropped
// values waiting for the next pruning (their inputs' memory) never outnumber the held ones.
size_t g_prune_at = 1;

// Pending values this thread is computing (nested when one's input is another's result). Inside
// one, a kernel settles its own inputs only: the list may hold the value being computed.
thread_local int t_computing = 0;

// Entries nobody else holds: never computed, dropped (their count given back). Called with
// g_list_mu held; the dropped references go to `dropped`, released by the caller after unlocking
// (a pending value's inputs may be large, and their release must not run under the lock).
void prune_locked(std::vector<IntrusivePtr<TensorImpl>>& dropped) {
  size_t kept = 0;
  for (size_t i = 0; i < g_list.size(); ++i) {
    TensorImpl& impl = *g_list[i];
    const bool computed = impl.pending_done();
    if (computed || impl.ref_count() == 1) {
      if (!computed) g_pending_values.fetch_sub(1, std::memory_order_acq_rel);
      dropped.push_back(std::move(g_list[i]));
    } else if (kept != i) {
      g_list[kept++] = std::move(g_list[i]);
    } else {
      ++kept;
    }
  }
  g_list.resize(kept);
  g_prune_at = std::max<size_t>(1, 2 * kept);
}

}  // namespace

bool TensorImpl::pending_done() const {
  const PendingValue* p = pending.load(std::memory_order_acquire);
  return p == nullptr || p->computed();
}

void TensorImpl::destroy_pending() { delete pending.load(std::memory_order_relaxed); }

void attach_pending(TensorImpl& impl, std::unique_ptr<PendingValue> value) {
  if (impl.pending.load(std::memory_order_relaxed) || !impl.buffer)
    throw Internal("[pending] a value can only be attached to a fresh concrete tensor");
  impl.pending.store(value.release(), std::memory_order_release);
  std::vector<IntrusivePtr<TensorImpl>> dropped;
  std::lock_guard lock(g_list_mu);
  if (g_list.size() >= g_prune_at) prune_locked(dropped);
  g_list.push_back(IntrusivePtr<TensorImpl>(&impl));
  g_pending_values.fetch_add(1, std::memory_order_acq_rel);
}

// Runs p once; true when this call ran it. Its inputs are let go of after, unlocked.
bool settle_pending(PendingValue& p, const TensorImpl& impl) {
  {
    std::lock_guard lock(p.mu_);
    if (p.done_.load(std::memory_order_relaxed)) return false;
    // A handle of its own on the same buffer: the kernel writing it must not find it pending.
    Tensor out(make_intrusive<TensorImpl>(impl.dtype, impl.shape, impl.buffer, impl.device));
    try {
      ++t_computing;
      struct Leave {
        ~Leave() { --t_computing; }
      } leave;
      p.compute(out);
    } catch (...) {
      p.error_ = std::current_exception();
    }
    p.done_.store(true, std::memory_order_release);
    g_pending_values.fetch_sub(1, std::memory_order_acq_rel);
  }
  p.release_inputs();
  return true;
}

void compute_pending(const TensorImpl& impl) {
  PendingValue* p = impl.pending.load(std::memory_order_acquire);
  if (!p) return;
  if (!p->computed()) settle_pending(*p, impl);
  if (p->error_) std::rethrow_exception(p->error_);
}

void settle_before_kernel(std::span<const Tensor> inputs) {
  if (t_computing > 0) {
    for (const Tensor& t : inputs)
      if (const TensorImpl* impl = tensor_impl_or_null(t)) compute_pending(*impl);
    return;
  }
  std::vector<IntrusivePtr<TensorImpl>> taken;
  {
    std::lock_guard lock(g_list_mu);
    taken.swap(g_list);
    g_prune_at = 1;
  }
  // Entries taken here are this thread's to compute or drop; another thread reading one of them
  // meanwhile computes it itself (or waits for this one), so nothing is lost by the swap.
  for (IntrusivePtr<TensorImpl>& impl : taken) {
    PendingValue* p = impl->pending.load(std::memory_order_acquire);
    if (impl->ref_count() == 1) {
      if (!p->computed()) g_pending_values.fetch_sub(1, std::memory_order_acq_rel);
      impl = IntrusivePtr<TensorImpl>();  // nobody can read it: dropped unread
      continue;
    }
    if (!p->computed()) settle_pending(*p, *impl);  // errors wait for its readers
  }
  taken.clear();
  for (const Tensor& t : inputs)
    if (const TensorImpl* impl = tensor_impl_or_null(t)) compute_pending(*impl);  // taken by another thread
}

void settle_for_raw_access(const TensorImpl& impl) {
  compute_pending(impl);
  // A pending value reading this memory holds a reference to it: to this tensor, or to another
  // view of its buffer. Without one (a tensor just made, being filled) nothing needs settling.
  const bool private_memory = impl.ref_count() == 1 && impl.buffer->ref_count() == 1;
  if (!private_memory && t_kernels_running == 0 && t_computing == 0 && !ThreadPool::in_worker() && any_pending())
    settle_before_kernel({});
}

}  // namespace weft
