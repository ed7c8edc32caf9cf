// The dispatch funnel: every front-end op goes through here, in every mode.
//
//   static const OpDef& op = op_def("Add");          // resolved once per front-end
//   Tensor y = dispatch1(op, {a, b}, {}, loc);
//
// While a recorder is installed (tracing, GraphScope) the op becomes a graph node and symbolic
// tensors come back. Otherwise the op runs now: shapes are inferred (bad arguments throw here,
// before any kernel), outputs are allocated on the chosen device, the kernel runs, and every
// installed observer (GradientTape) sees the op.
#pragma once

#include <initializer_list>
#include <source_location>
#include <span>
#include <string_view>
#include <vector>

#include "api/source_location.h"
#include "runtime/attr.h"
#include "runtime/op_registry.h"
#include "runtime/tensor.h"

namespace weft {

// The registered definition of a built-in op; registers the built-ins on first use.
const OpDef& op_def(std::string_view name);

std::vector<Tensor> dispatch(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs = {},
                             const SourceLocation& loc = SourceLocation::current());
// For ops with exactly one output: avoids building a vector on the hot path.
Tensor dispatch1(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs = {},
                 const SourceLocation& loc = SourceLocation::current());

inline Tensor dispatch1(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {},
                        const SourceLocation& loc = SourceLocation::current()) {
  return dispatch1(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs, loc);
}

}  // namespace weft
