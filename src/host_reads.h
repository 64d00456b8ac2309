// Counted device-to-host reads.
//
// Every place in the engine that copies device data to the host (to decide
// something on the host, or to hand results out) goes through these
// functions, so that "host reads per step" is a number tests can assert on any
// device.  A CPU tensor read still counts: the rule is about the code path,
// not about where the memory happens to live.
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace uma {

// Number of counted host reads since process start (or since reset).
int64_t host_read_count();
void reset_host_read_count();

// Copies `t` to a contiguous CPU tensor; counts one read.
torch::Tensor to_host(const torch::Tensor& t);

// Reads a one-element tensor; counts one read.
double read_scalar(const torch::Tensor& t);
int64_t read_int(const torch::Tensor& t);

}  // namespace uma
