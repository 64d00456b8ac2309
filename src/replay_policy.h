// When an evaluation is captured as a CUDA graph and replayed: the decisions,
// made from host values only, so that they are tested on any machine.
//
// A capture is valid for one key: everything that fixes the captured
// kernels, their shapes and the device memory they read (the layout, the
// graph's plan and capacities, the memory plan, the merged experts, what is
// computed).  The first step of a key runs eager: it may grow a capacity,
// merge the experts or make a new plan, all of which change the key.  The
// second consecutive step with that key captures; later ones replay.  Any
// other key drops the capture (it reads device tables that belong to the
// engine's current layout and graph, which a new key may free), so a run
// whose key changes every step (Monte Carlo moves, GCMC) never captures.  A
// key whose capture failed runs eager from then on, and the reason is
// reported once.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace uma {

class ReplayPolicy {
 public:
  enum class Action { kEager, kCapture, kReplay };

  // What this step does, for its key.
  Action next(const std::vector<int64_t>& key);
  // After kCapture: the capture succeeded and is held for the key.
  void captured();
  // After kCapture: it failed.  The key runs eager from now on; true the
  // first time a key is refused (the caller logs `why` then).
  bool refused(const std::string& why);
  // New weights (or anything else outside the key): drop the capture; the
  // next step is eager again.
  void invalidate();

  bool holds_capture() const { return holding_; }
  int64_t captures() const { return captures_; }
  int64_t replays() const { return replays_; }
  const std::string& last_refusal() const { return last_refusal_; }

 private:
  std::vector<int64_t> key_;      // the latest step's key
  bool seen_ = false;             // key_ is set
  bool holding_ = false;          // a capture of key_ exists
  std::set<std::vector<int64_t>> refused_;
  std::string last_refusal_;
  int64_t captures_ = 0, replays_ = 0;
};

}  // namespace uma
