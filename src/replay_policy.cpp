#include "replay_policy.h"

namespace uma {

ReplayPolicy::Action ReplayPolicy::next(const std::vector<int64_t>& key) {
  const bool same = seen_ && key == key_;
  if (!same) {
    key_ = key;
    seen_ = true;
    holding_ = false;
    return Action::kEager;
  }
  if (refused_.count(key)) return Action::kEager;
  if (holding_) {
    ++replays_;
    return Action::kReplay;
  }
  return Action::kCapture;
}

void ReplayPolicy::captured() {
  holding_ = true;
  ++captures_;
}

bool ReplayPolicy::refused(const std::string& why) {
  holding_ = false;
  last_refusal_ = why;
  return refused_.insert(key_).second;
}

void ReplayPolicy::invalidate() {
  holding_ = false;
  seen_ = false;
}

}  // namespace uma
