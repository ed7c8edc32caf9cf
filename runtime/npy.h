// NumPy's .npy file format: the inputs and outputs of weft-run, and a way to hand tensors to and
// from Python (`numpy.load` / `numpy.save`).
//
//   save_npy("x.npy", t);              // atomic: temporary file, fsync, rename
//   Tensor t = load_npy("x.npy");      // DataLoss / InvalidArgument naming the file and the fault
//
// Layout: the magic "\x93NUMPY", a version (major, minor), the header length (2 bytes in version
// 1.0, 4 in 2.0 and 3.0, little-endian), the header — a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces to a multiple
// of 64 bytes and ending in '\n' — then the raw elements.
//
// Reading accepts versions 1.0, 2.0 and 3.0; big-endian data ('>f4') is byte-swapped and
// Fortran-order data is transposed, so the tensor is always native and row-major. Dtypes are
// those weft and NumPy share: float16 '<f2', float32 '<f4', float64 '<f8', int8 '|i1',
// uint8 '|u1', int32 '<i4', int64 '<i8' and bool '|b1'; any other ('<c8', '|O', '<U5', structured
// dtypes) is an InvalidArgument naming it. Writing produces exactly what numpy.save writes
// (version 1.0, or 2.0 if the header would not fit); bfloat16 has no NumPy dtype and is refused.
//
// Files are untrusted: the header is parsed as a Python literal by a small strict parser, its
// length, rank and element count are bounded and checked against the file before anything is
// allocated, the data must be exactly as long as the shape needs, and bool bytes must be 0 or 1.
// Malformed bytes are a DataLoss naming the source; a well-formed file weft cannot hold is an
// InvalidArgument.
#pragma once

#include <string>
#include <string_view>

#include "runtime/array_header.h"
#include "runtime/tensor.h"

namespace weft {

// `source` names the bytes in error messages (a path, "<memory>").
Tensor decode_npy(std::string_view bytes, std::string_view source = "<memory>");
// The bytes numpy.save writes for the same array. The tensor must be concrete; it may live on
// any device (it is copied to the host).
std::string encode_npy(const Tensor& t);

Tensor load_npy(const std::string& path);
// The dtype and shape a file's header declares, reading only the header (the data is checked
// when the file is loaded).
ArrayHeader read_npy_header(const std::string& path);
void save_npy(const std::string& path, const Tensor& t);

}  // namespace weft
