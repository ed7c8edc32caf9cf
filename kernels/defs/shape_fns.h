// Helpers shared by the infer functions of kernels/defs/*.cpp: broadcasting, axis checks and
// dtype constraints. Every check throws through InferContext::fail, so messages start with the
// op's front-end name. Unknown dims (-1) are allowed everywhere: graph mode infers with them.
#pragma once

#include <initializer_list>
#include <string>

#include "runtime/op_registry.h"

namespace weft::defs {

inline constexpr std::initializer_list<DType> kRealNumeric = {DType::Float32, DType::Float64, DType::Int32,
                                                              DType::Int64};
inline constexpr std::initializer_list<DType> kFloating = {DType::Float32, DType::Float64};
inline constexpr std::initializer_list<DType> kSignedNumeric = kRealNumeric;
// The same plus float16 and bfloat16, for ops that compute those in float32 and round once: on the
// CPU through their float32 kernel (kernels/cpu/via_float32.h), on a GPU in registers. An op
// admits them only where both devices register 16-bit kernels; the rest refuse them here, naming
// the op and the dtype, before anything runs.
inline constexpr std::initializer_list<DType> kRealNumericOrHalf = {DType::Float32, DType::Float64, DType::Int32,
                                                                    DType::Int64,   DType::Float16, DType::BFloat16};
inline constexpr std::initializer_list<DType> kFloatingOrHalf = {DType::Float32, DType::Float64, DType::Float16,
                                                                 DType::BFloat16};

// "float32 (2, 3), int32 (3,)": every input's dtype and shape, for error messages.
std::string describe_inputs(const InferContext& ctx);
// NumPy broadcasting of two shapes.
Shape broadcast_shapes(const InferContext& ctx, const Shape& a, const Shape& b);
// Maps a possibly negative axis into [0, rank); fails naming the axis and rank otherwise.
int64_t normalize_axis(const InferContext& ctx, int64_t axis, int64_t rank);
void check_dtype_in(const InferContext& ctx, int input, std::initializer_list<DType> allowed);
// Inputs [first, last) must share one dtype.
void check_same_dtype(const InferContext& ctx, int first, int last);
std::string dtype_list(std::initializer_list<DType> dtypes);

// Output 0 takes input 0's dtype and shape.
void infer_same_as_input(InferContext& ctx);
// The same, for input dtypes in kRealNumericOrHalf / kFloatingOrHalf only (every op using these
// registers 16-bit kernels).
void infer_unary_numeric(InferContext& ctx);
void infer_unary_float(InferContext& ctx);

}  // namespace weft::defs
