// The ATen operators called while an OpWatch lives (every thread: autograd's
// too), and among them those that on CUDA add floating-point rows with
// atomics, in an order that changes from run to run.
#pragma once

#include <ATen/record_function.h>

#include <mutex>
#include <set>
#include <string>

namespace uma::test {

class OpWatch {
 public:
  OpWatch() {
    {
      std::lock_guard<std::mutex> lock(mutex());
      seen().clear();
    }
    handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&OpWatch::record)
                                        .needsInputs(true)
                                        .scopes({at::RecordScope::FUNCTION}));
  }
  ~OpWatch() { at::removeCallback(handle_); }
  OpWatch(const OpWatch&) = delete;
  OpWatch& operator=(const OpWatch&) = delete;

  // Every operator called, by name, with " (floating)" where its first tensor
  // input is floating point, " (accumulate)" where its `accumulate` is set and
  // " (reduce)" for a scatter with a reduction.
  std::set<std::string> calls() const {
    std::lock_guard<std::mutex> lock(mutex());
    return seen();
  }

  // The calls that add floating-point rows with float atomics on CUDA (index
  // sums, scatters with a sum, accumulating puts, the backward passes of
  // index_select and embedding, a cumulative sum): none of them may run
  // where sums run in segments.
  std::set<std::string> float_atomics() const {
    static const std::set<std::string> adders = {"aten::index_add",
                                                 "aten::index_add_",
                                                 "aten::scatter_add",
                                                 "aten::scatter_add_",
                                                 "aten::scatter_reduce",
                                                 "aten::scatter_reduce_",
                                                 "aten::index_reduce",
                                                 "aten::index_reduce_",
                                                 "aten::index_select_backward",
                                                 "aten::embedding_backward",
                                                 "aten::embedding_dense_backward",
                                                 "aten::_embedding_bag_backward",
                                                 "aten::_embedding_bag_dense_backward",
                                                 "aten::_segment_reduce_backward",
                                                 "aten::cumsum",
                                                 "aten::cumsum_",
                                                 "aten::index_copy_",
                                                 "aten::bincount",
                                                 "aten::histc"};
    std::set<std::string> out;
    for (const auto& call : calls()) {
      const auto name = call.substr(0, call.find(' '));
      const bool floating = call.find(" (floating)") != std::string::npos;
      const bool accumulate = call.find(" (accumulate)") != std::string::npos ||
                              call.find(" (reduce)") != std::string::npos;
      if ((floating && adders.count(name)) || accumulate) out.insert(call);
    }
    return out;
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::set<std::string>& seen() {
    static std::set<std::string> s;
    return s;
  }
  static std::unique_ptr<at::ObserverContext> record(const at::RecordFunction& fn) {
    std::string call = fn.name();
    const auto inputs = fn.inputs();
    for (const auto& v : inputs)
      if (v.isTensor()) {
        if (v.toTensor().defined() && v.toTensor().is_floating_point()) call += " (floating)";
        break;
      }
    // index_put_(self, indices, values, accumulate) and put_(self, index, source, accumulate)
    const std::string name = fn.name();
    if ((name.rfind("aten::index_put", 0) == 0 || name.rfind("aten::_index_put_impl", 0) == 0 ||
         name.rfind("aten::_unsafe_index_put", 0) == 0 || name.rfind("aten::put", 0) == 0) &&
        inputs.size() >= 4 && inputs[3].isBool() && inputs[3].toBool())
      call += " (accumulate)";
    // scatter(self, dim, index, src, reduce="add" or "multiply")
    if (name.rfind("aten::scatter", 0) == 0)
      for (const auto& v : inputs)
        if (v.isString()) call += " (reduce)";
    std::lock_guard<std::mutex> lock(mutex());
    seen().insert(call);
    return nullptr;
  }
  at::CallbackHandle handle_;
};

}  // namespace uma::test
