// The named phases of a training step as RecordFunction user scopes
// "uma::train::NAME" (batch, graph, forward, gradient, loss, backward,
// optimizer): nearly free when nothing listens; `uma bench-train --phases`
// times them.
#pragma once

#include <ATen/record_function.h>

#include <optional>

namespace uma::train {

class StepPhase {
 public:
  explicit StepPhase(const char* name) { begin(name); }
  StepPhase(const StepPhase&) = delete;
  StepPhase& operator=(const StepPhase&) = delete;
  // Ends this phase and begins the next.
  void next(const char* name) {
    scope_.reset();
    begin(name);
  }

 private:
  void begin(const char* name) {
    scope_.emplace(at::RecordScope::USER_SCOPE);
    if (scope_->isActive()) scope_->before(name);
  }
  std::optional<at::RecordFunction> scope_;  // its destructor ends the phase
};

}  // namespace uma::train
