// When an evaluation is captured as a CUDA graph and replayed, and which
// captures are kept: decisions made from host values only, so that they are
// tested on any machine (tests/test_replay.cpp).  `Capture` is whatever the
// caller records (the engine's: a CUDA graph, its inputs and outputs); the
// cache owns it and frees it when it is dropped.
//
// A capture belongs to one key within one epoch.
//  - The epoch is what all captures made under it share and what never
//    comes back once it changes (the engine's counters of layouts, expert
//    merges and memory plans, the graph's capacities): a new epoch frees
//    every capture.  So does invalidate() (new weights).
//  - The key is what may alternate within an epoch (whether per-atom virials
//    are computed, the graph's bin plan for the current cell).  Each capture
//    keeps the device tables it reads alive, so several keys can hold one.
// The first step of a key runs eager: it may grow a capacity, merge the
// experts or make a new plan, which change the epoch (the caller says so
// with settled()).  The second consecutive step with that key captures;
// from then on the key replays whenever it comes back, even after steps
// with other keys.  A run whose key changes every step (Monte Carlo moves,
// GCMC) never captures.  At most
// `max_captures` are kept, and together they hold at most `max_bytes` of
// device memory, except that the capture in use is always kept: the least
// recently used go first.  A key whose capture failed runs eager for the
// rest of the epoch; it is reported once.
#pragma once

#include <cstdint>
#include <iterator>
#include <limits>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/uma_error.h"

namespace uma {

template <class Capture>
class ReplayCache {
 public:
  using Key = std::vector<int64_t>;
  enum class Action { kEager, kCapture, kReplay };

  explicit ReplayCache(size_t max_captures = 4,
                       double max_bytes = std::numeric_limits<double>::infinity())
      : max_captures_(max_captures), max_bytes_(max_bytes) {}

  void set_limits(size_t max_captures, double max_bytes) {
    if (max_captures < 1) throw Error("a replay cache holds at least one capture");
    max_captures_ = max_captures;
    max_bytes_ = max_bytes;
    evict();
  }

  // What this step does.  kReplay: current() is the key's capture.
  Action next(const Key& epoch, const Key& key) {
    if (!seen_ || epoch != epoch_) {
      entries_.clear();
      refused_.clear();
      epoch_ = epoch;
      key_ = key;
      seen_ = true;
      return Action::kEager;
    }
    const bool again = key == key_;
    key_ = key;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->key != key) continue;
      entries_.splice(entries_.begin(), entries_, it);  // most recently used first
      ++replays_;
      return Action::kReplay;
    }
    if (!again || refused_.count(key)) return Action::kEager;
    return Action::kCapture;
  }

  // The capture of the latest step's key.
  Capture& current() {
    if (entries_.empty() || entries_.front().key != key_)
      throw Error("no CUDA-graph capture of this step's key is held");
    return *entries_.front().capture;
  }

  // After a kEager step: the epoch and the key as that step left them.  A
  // first step sizes the graph and merges the experts, so the epoch it was
  // asked under is already gone, and its key (the graph's bin plan) was made
  // before the graph had capacities; told here, the cache drops what belonged
  // to the old epoch and the step's key counts as seen under the new one: its
  // next step captures.
  void settled(const Key& epoch, const Key& key) {
    key_ = key;
    if (epoch == epoch_) return;
    entries_.clear();
    refused_.clear();
    epoch_ = epoch;
  }

  // After kCapture: the capture succeeded and holds `bytes` of device memory.
  // Drops the least recently used captures beyond the limits.
  Capture& captured(std::unique_ptr<Capture> capture, double bytes) {
    entries_.push_front(Entry{key_, std::move(capture), bytes});
    ++captures_;
    evict();
    return *entries_.front().capture;
  }

  // After kCapture: it failed.  The key runs eager for the rest of the
  // epoch; true the first time it is refused (the caller logs `why` then).
  bool refused(const std::string& why) {
    last_refusal_ = why;
    return refused_.insert(key_).second;
  }

  // New weights (or anything else outside the epoch): every capture is
  // dropped, and the next step is eager.
  void invalidate() {
    entries_.clear();
    refused_.clear();
    seen_ = false;
  }

  size_t held() const { return entries_.size(); }
  double held_bytes() const {
    double sum = 0;
    for (const auto& e : entries_) sum += e.bytes;
    return sum;
  }
  int64_t captures() const { return captures_; }
  int64_t replays() const { return replays_; }
  int64_t evictions() const { return evictions_; }
  const std::string& last_refusal() const { return last_refusal_; }

 private:
  struct Entry {
    Key key;
    std::unique_ptr<Capture> capture;
    double bytes;
  };

  void evict() {
    while (entries_.size() > 1 && (entries_.size() > max_captures_ || held_bytes() > max_bytes_)) {
      entries_.pop_back();
      ++evictions_;
    }
  }

  size_t max_captures_;
  double max_bytes_;
  std::list<Entry> entries_;  // most recently used first
  Key epoch_, key_;           // the latest step's
  bool seen_ = false;         // epoch_ and key_ are set
  std::set<Key> refused_;     // keys of this epoch whose capture failed
  std::string last_refusal_;
  int64_t captures_ = 0, replays_ = 0, evictions_ = 0;
};

}  // namespace uma
