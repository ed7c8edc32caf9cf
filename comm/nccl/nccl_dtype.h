// weft's dtypes as NCCL's. Needs nccl.h: built with CUDA only (tested without a GPU in gpu_tests).
#pragma once

#include <nccl.h>

#include <optional>

#include "runtime/dtype.h"

namespace weft {

// NCCL's type for `dtype`; nullopt for bool (NCCL has none; a sum of bytes would not be a logical or).
inline std::optional<ncclDataType_t> nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int8: return ncclInt8;
    case DType::UInt8: return ncclUint8;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Bool: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace weft
