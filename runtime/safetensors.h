// The safetensors file format: 8-byte little-endian header length, a JSON header mapping each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (plus "__metadata__", a map of
// strings), then the raw little-endian bytes. Files written here load in Python's `safetensors`
// package and in PyTorch. weft stores a CRC32C of every tensor in the metadata
// ("crc32c/<name>": 8 hex digits) and checks it when reading; a tensor without one (a file
// written by another tool) is accepted unchecked. Tensors are laid out widest dtype first, so
// each starts at a multiple of its element size; readers accept gaps, never overlaps.
//
//   save_tensors("ckpt.safetensors", {{"model/dense/kernel", w}}, {{"step", "100"}});
//   TensorFile f = load_tensors("ckpt.safetensors");   // DataLoss/InvalidArgument naming the tensor
//
// Writing is atomic: a temporary file in the same directory, fsync, rename, fsync of the
// directory; a process killed mid-save leaves any previous file intact. Reading treats the file
// as untrusted: header size bounded, offsets checked (in range, not overlapping, matching dtype
// and shape), checksums verified, before any tensor is returned.
#pragma once

#include <map>
#include <string>

#include "runtime/tensor.h"

namespace weft {

struct TensorFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // without weft's own crc32c entries
};

void save_tensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                  const std::map<std::string, std::string>& metadata = {});
TensorFile load_tensors(const std::string& path);
// The same from and to memory (the file's bytes), for fuzzing and for embedding.
std::string encode_tensors(const std::map<std::string, Tensor>& tensors,
                           const std::map<std::string, std::string>& metadata = {});
TensorFile decode_tensors(const std::string& bytes, const std::string& source_name = "<memory>");

}  // namespace weft
