// Where an evaluation's time goes, by operator: the outermost aten:: calls and
// lean edge operators (uma::lean::) timed by name while
// an OpProfile lives (`uma bench --profile`, `uma bench-train --profile`).
// Nested calls count towards their outermost operator; time outside any
// operator (autograd bookkeeping, Python-free glue) is not counted.  On a
// CUDA device the operators only queue kernels: with `synchronize_cuda` the
// device is synchronised at each outermost operator's start and end, so that
// its time is its kernels' (the step itself runs slower, without overlap),
// and the autograd engine's device thread, which runs the backward there, is
// counted too; on the CPU only the calling thread (which runs the backward).
#pragma once

#include <ATen/record_function.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace uma::tool {

class OpProfile {
 public:
  explicit OpProfile(bool synchronize_cuda = false);
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;
  // The `top` operators by time, in ms per `runs`, with their calls per run.
  nlohmann::json top(int top, int runs) const;

 private:
  at::CallbackHandle handle_;
};

}  // namespace uma::tool
