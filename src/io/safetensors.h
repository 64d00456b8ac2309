// Reader and writer for the safetensors container: an 8-byte little-endian
// header length, a JSON header naming every tensor (dtype, shape, byte range)
// plus a string-to-string "__metadata__" map, then the raw tensor bytes.
#pragma once

#include <istream>
#include <map>
#include <string>

#include <torch/torch.h>

namespace uma {

struct TensorFile {
  std::map<std::string, torch::Tensor> tensors;  // CPU, contiguous
  std::map<std::string, std::string> metadata;
};

// Throws uma::Error naming `path` when the file is missing, truncated or not
// a safetensors file.
TensorFile read_safetensors(const std::string& path);
// The same from a seekable stream; `path` names it in messages.
TensorFile read_safetensors(std::istream& in, const std::string& path);

// Writes atomically (temporary file, then rename); throws uma::Error when the
// path cannot be written.
void write_safetensors(const std::string& path, const TensorFile& file);

}  // namespace uma
