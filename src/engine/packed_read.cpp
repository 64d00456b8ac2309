#include "engine/packed_read.h"

#include <numeric>

#include "runtime/transfers.h"
#include "core/uma_error.h"

namespace uma {

PackedRead::Field& PackedRead::append(const std::string& name, std::vector<int64_t> shape) {
  if (has(name)) throw Error("internal: packed field '" + name + "' registered twice");
  Field f;
  f.name = name;
  f.numel = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
  f.shape = std::move(shape);
  f.offset = size_;
  size_ += f.numel;
  fields_.push_back(std::move(f));
  return fields_.back();
}

bool PackedRead::add(const std::string& name, const torch::Tensor& t) {
  if (!t.defined()) return false;
  append(name, t.sizes().vec());
  parts_.push_back(t.reshape({-1}).to(torch::kFloat64));
  return true;
}

void PackedRead::declare(const std::string& name, std::vector<int64_t> shape) {
  append(name, std::move(shape));
}

torch::Tensor PackedRead::flat() const {
  if (parts_.size() != fields_.size())
    throw Error("internal: declared packed fields have no values to send");
  return parts_.empty() ? torch::zeros({0}, torch::kFloat64) : torch::cat(parts_);
}

void PackedRead::read() {
  const auto host = to_host(flat());
  const double* v = host.data_ptr<double>();  // host data
  host_.assign(v, v + host.numel());
}

void PackedRead::unpack(std::vector<double> values) {
  if (static_cast<int64_t>(values.size()) != size_)
    throw Error("internal: a packed buffer of " + std::to_string(values.size()) + " values where " +
                std::to_string(size_) + " were registered");
  host_ = std::move(values);
}

void PackedRead::update(const std::vector<std::string>& names,
                        const std::function<void(std::vector<double>&)>& f) {
  std::vector<double> values;
  for (const auto& name : names)
    if (has(name)) {
      const Field& fd = field(name);
      values.insert(values.end(), host_.begin() + fd.offset, host_.begin() + fd.offset + fd.numel);
    }
  const size_t size = values.size();
  f(values);
  if (values.size() != size) throw Error("internal: a packed update changed the number of values");
  size_t at = 0;
  for (const auto& name : names)
    if (has(name)) {
      const Field& fd = field(name);
      std::copy(values.begin() + at, values.begin() + at + fd.numel, host_.begin() + fd.offset);
      at += fd.numel;
    }
}

bool PackedRead::has(const std::string& name) const {
  for (const auto& f : fields_)
    if (f.name == name) return true;
  return false;
}

const PackedRead::Field& PackedRead::field(const std::string& name) const {
  if (static_cast<int64_t>(host_.size()) != size_)
    throw Error("internal: packed field '" + name + "' read before its values");
  for (const auto& f : fields_)
    if (f.name == name) return f;
  throw Error("internal: no packed field '" + name + "'");
}

torch::Tensor PackedRead::tensor(const std::string& name) const {
  const Field& f = field(name);
  double* values = const_cast<double*>(host_.data() + f.offset);
  return torch::from_blob(values, f.shape, torch::kFloat64).clone();  // host data
}

std::vector<double> PackedRead::vector(const std::string& name) const {
  const Field& f = field(name);
  return {host_.begin() + f.offset, host_.begin() + f.offset + f.numel};
}

double PackedRead::scalar(const std::string& name) const {
  const Field& f = field(name);
  if (f.numel != 1)
    throw Error("internal: packed field '" + name + "' holds " + std::to_string(f.numel) +
                " values");
  return host_[f.offset];
}

}  // namespace uma
