// Several named values packed into one float64 buffer: one counted host read
// of device results (Engine::read, Trainer::read_stats), or one broadcast of
// host values between processes (fix uma/train's labels).
//
// Fields are registered by name, in order; each takes the next slots of the
// buffer, so no offset is ever written by hand.  The sending side add()s
// tensors (any dtype, any device; undefined tensors register nothing), the
// receiving side of a broadcast declare()s the same names and shapes and
// unpack()s the buffer.  After read() or unpack(), fields are read by name.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace uma {

class PackedRead {
 public:
  // Registers `t` (flattened, as float64) under `name`; returns whether it
  // did (false for an undefined tensor).
  bool add(const std::string& name, const torch::Tensor& t);
  // Registers a field of this shape without its values (the receiving side).
  void declare(const std::string& name, std::vector<int64_t> shape);

  // The registered values as one flat float64 tensor on their device.
  torch::Tensor flat() const;
  // flat() copied to the host: one counted read.
  void read();
  // The buffer of a broadcast; throws uma::Error if its size is not size().
  void unpack(std::vector<double> values);
  // The host buffer (after read() or unpack()).
  const std::vector<double>& values() const { return host_; }
  int64_t size() const { return size_; }

  // Hands the values of the named fields (those registered), in that order,
  // to `f` as one vector (e.g. a sum over processes) and stores what it
  // leaves there back into them.
  void update(const std::vector<std::string>& names,
              const std::function<void(std::vector<double>&)>& f);

  bool has(const std::string& name) const;
  // A field as a CPU float64 tensor of its registered shape (a copy).
  torch::Tensor tensor(const std::string& name) const;
  // A field's values in order; scalar(): a one-value field's value.
  std::vector<double> vector(const std::string& name) const;
  double scalar(const std::string& name) const;

 private:
  struct Field {
    std::string name;
    std::vector<int64_t> shape;
    int64_t offset = 0, numel = 0;
  };
  const Field& field(const std::string& name) const;
  Field& append(const std::string& name, std::vector<int64_t> shape);

  std::vector<Field> fields_;
  std::vector<torch::Tensor> parts_;  // the sender's values, in field order
  std::vector<double> host_;
  int64_t size_ = 0;
};

}  // namespace uma
