// Lending a tensor handle without counting a reference, for the two places whose per-call cost is
// little more than reference-count updates: weft::function lends its call's arguments
// (api/function_signature.h) and the executor lends its value table to each kernel.
//
//   Tensor lent = TensorLending::lend(owner);   // owner must outlive lent
//   ... read or copy lent as any Tensor ...
//   TensorLending::forget(lent);                // never destroy or assign it instead
#pragma once

#include "runtime/tensor.h"

namespace weft {

class TensorLending {
 public:
  // A handle to t's tensor that holds no reference: copying it or reading through it is as usual
  // (a copy is a real reference), but its holder must let go of it with forget(), and t must
  // outlive it.
  static Tensor lend(const Tensor& t) { return Tensor(IntrusivePtr<TensorImpl>::unowned(t.impl_.get())); }
  static void forget(Tensor& lent) { lent.impl_.forget_unowned(); }
};

}  // namespace weft
