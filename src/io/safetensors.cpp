#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/uma_error.h"

namespace uma {
namespace {

using nlohmann::json;

struct DtypeName {
  const char* name;
  torch::ScalarType type;
};

constexpr DtypeName kDtypes[] = {
    {"F64", torch::kFloat64},   {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
    {"BF16", torch::kBFloat16}, {"I64", torch::kInt64},   {"I32", torch::kInt32},
    {"I16", torch::kInt16},     {"I8", torch::kInt8},     {"U8", torch::kUInt8},
    {"BOOL", torch::kBool},
};

torch::ScalarType dtype_from_name(const std::string& name, const std::string& where) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.type;
  throw Error(where + ": unsupported tensor dtype '" + name + "'");
}

const char* dtype_name(torch::ScalarType type) {
  for (const auto& d : kDtypes)
    if (type == d.type) return d.name;
  throw Error(std::string("cannot store tensors of dtype ") + c10::toString(type));
}

// More dimensions than any model tensor has; a header asking for more is corrupt.
constexpr size_t kMaxDims = 8;

}  // namespace

TensorFile read_safetensors(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("'" + path + "' is a folder, not a model file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open model file '" + path + "'");
  return read_safetensors(in, path);
}

TensorFile read_safetensors(std::istream& in, const std::string& path) {
  in.seekg(0, std::ios::end);
  const auto end = in.tellg();
  in.seekg(0);
  if (end < 0 || !in) throw Error("cannot read '" + path + "'");
  const auto file_size = static_cast<uint64_t>(end);
  if (file_size < 8) throw Error("'" + path + "' is too short to be a safetensors file");

  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len == 0 || header_len > file_size - 8 || header_len > (uint64_t{1} << 30))
    throw Error("'" + path + "' is not a safetensors file (bad header length)");

  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  json doc;
  try {
    doc = json::parse(header);
  } catch (const json::exception&) {
    throw Error("'" + path + "' is not a safetensors file (header is not JSON)");
  }
  if (!doc.is_object()) throw Error("'" + path + "' is not a safetensors file");

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_len = file_size - data_start;
  TensorFile out;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object())
        throw Error("'" + path + "': __metadata__ is not a map of strings");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string())
          throw Error("'" + path + "': metadata entry '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "'" + path + "', tensor '" + it.key() + "'";
    const json& entry = it.value();
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets"))
      throw Error(where + ": incomplete header entry");
    const json& dtype = entry["dtype"];
    const json& dims = entry["shape"];
    const json& range = entry["data_offsets"];
    if (!dtype.is_string()) throw Error(where + ": dtype is not a string");
    const auto type = dtype_from_name(dtype.get<std::string>(), where);
    if (!dims.is_array() || dims.size() > kMaxDims)
      throw Error(where + ": shape is not a list of at most " + std::to_string(kMaxDims) +
                  " sizes");
    if (!range.is_array() || range.size() != 2)
      throw Error(where + ": data_offsets is not a pair of byte offsets");
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const auto& d : dims) {
      if (!d.is_number_unsigned())
        throw Error(where + ": a dimension is not a non-negative integer");
      const uint64_t s = d.get<uint64_t>();
      if (s > std::max<uint64_t>(data_len, 1))
        throw Error(where + ": a dimension exceeds the file's size");
      // Element counts beyond the file's byte count are refused before they could overflow.
      if (s != 0 && numel > data_len / s)
        throw Error(where + ": its shape needs more bytes than the file holds");
      numel *= s;
      shape.push_back(static_cast<int64_t>(s));
    }
    for (const auto& o : range)
      if (!o.is_number_unsigned())
        throw Error(where + ": a byte offset is not a non-negative integer");
    const uint64_t first = range[0].get<uint64_t>(), last = range[1].get<uint64_t>();
    if (first > last || last > data_len)
      throw Error(where + ": byte range lies outside the file (truncated file?)");
    const uint64_t nbytes = numel * c10::elementSize(type);
    if (nbytes != last - first)
      throw Error(where + ": byte range does not match its shape and dtype");
    auto t = torch::empty(shape, torch::TensorOptions().dtype(type));
    in.seekg(static_cast<std::streamoff>(data_start + first));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(nbytes));
    if (!in) throw Error(where + ": could not read its bytes (truncated file?)");
    out.tensors.emplace(it.key(), std::move(t));
  }
  return out;
}

void write_safetensors(const std::string& path, const TensorFile& file) {
  json header = json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  uint64_t offset = 0;
  std::vector<torch::Tensor> blobs;
  for (const auto& [name, tensor] : file.tensors) {
    auto t = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dtype_name(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    blobs.push_back(t);
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');  // align the data

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write '" + path + "'");
    const uint64_t len = text.size();
    unsigned char len_bytes[8];
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(len >> (8 * i));
    out.write(reinterpret_cast<const char*>(len_bytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : blobs)
      out.write(static_cast<const char*>(t.data_ptr()),
                static_cast<std::streamsize>(t.numel() * t.element_size()));
    out.flush();
    if (!out) throw Error("failed while writing '" + path + "'");
  }
  // On disk before it replaces the target: a crash leaves the old file or the new one.
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (!synced) {
    std::remove(tmp.c_str());
    throw Error("cannot flush '" + tmp + "' to disk");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot move the written file into place at '" + path + "'");
  }
}

}  // namespace uma
