// Shared by the graph file's reader and writer (runtime/graph_format_*.cpp); not installed API.
#pragma once

#include <string_view>

#include "runtime/dtype.h"
#include "runtime/proto/graph.capnp.h"

namespace weft::graph_format {

// Every file starts with these 8 bytes, then the Cap'n Proto message.
inline constexpr std::string_view kMagic{"WEFTGRPH", 8};

// The schema's DType enum is the file's own numbering, independent of weft::DType's order.
inline proto::DType to_proto(DType d) {
  switch (d) {
    case DType::Float16: return proto::DType::FLOAT16;
    case DType::BFloat16: return proto::DType::BFLOAT16;
    case DType::Float32: return proto::DType::FLOAT32;
    case DType::Float64: return proto::DType::FLOAT64;
    case DType::Int8: return proto::DType::INT8;
    case DType::UInt8: return proto::DType::UINT8;
    case DType::Int32: return proto::DType::INT32;
    case DType::Int64: return proto::DType::INT64;
    case DType::Bool: return proto::DType::BOOL;
  }
  return proto::DType::FLOAT32;
}

// False for a value this build does not know (a newer writer, or damage).
inline bool from_proto(proto::DType p, DType& out) {
  switch (p) {
    case proto::DType::FLOAT16: out = DType::Float16; return true;
    case proto::DType::BFLOAT16: out = DType::BFloat16; return true;
    case proto::DType::FLOAT32: out = DType::Float32; return true;
    case proto::DType::FLOAT64: out = DType::Float64; return true;
    case proto::DType::INT8: out = DType::Int8; return true;
    case proto::DType::UINT8: out = DType::UInt8; return true;
    case proto::DType::INT32: out = DType::Int32; return true;
    case proto::DType::INT64: out = DType::Int64; return true;
    case proto::DType::BOOL: out = DType::Bool; return true;
  }
  return false;
}

}  // namespace weft::graph_format
