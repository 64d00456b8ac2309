#include "edges/edge_chunks.h"

#include <algorithm>

#include "core/uma_error.h"

namespace uma::edges {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The differentiable inputs of one chunked sum, as "slots": x, vec, then the
// tensors the contribution reads.
constexpr size_t kX = 0, kVec = 1, kReads = 2;

// The non-tensor state of one chunked sum, kept on its autograd nodes.
struct ChunkedWork : torch::CustomClassHolder {
  EdgeContribution contribution;
  int64_t edges = 0, chunk = 0;
  // Set on the first derivative's node only: the slots it returns.
  std::vector<bool> returned;

  template <typename F>
  void for_each_chunk(F f) const {
    for (int64_t begin = 0; begin < edges; begin += chunk) f(begin, std::min(edges, begin + chunk));
  }
};

// One chunk recomputed with gradients on: x, the chunk's vec and every read
// that is not a leaf as new leaves (with a gradient where `leaf` asks), the
// leaf reads as they stand.
struct Recomputed {
  tensor_list inputs;  // per slot
  torch::Tensor out;   // out_shape
};

Recomputed recompute(const ChunkedWork& work, const tensor_list& slots, int64_t begin, int64_t end,
                     const std::vector<bool>& leaf) {
  Recomputed r;
  r.inputs = slots;
  r.inputs[kX] = slots[kX].detach().requires_grad_(leaf[kX]);
  r.inputs[kVec] = slots[kVec].narrow(0, begin, end - begin).detach().requires_grad_(leaf[kVec]);
  for (size_t i = kReads; i < slots.size(); ++i)
    if (!slots[i].is_leaf()) r.inputs[i] = slots[i].detach().requires_grad_(leaf[i]);
  const std::vector<torch::Tensor> reads(r.inputs.begin() + kReads, r.inputs.end());
  r.out = work.contribution(r.inputs[kX], r.inputs[kVec], reads, begin, end);
  return r;
}

// Per-slot sums over chunks: vec's chunks are laid end to end in a buffer of
// vec's shape, every other slot adds up.
class GradientSum {
 public:
  explicit GradientSum(size_t slots) : sums_(slots) {}

  void add(size_t slot, const torch::Tensor& d, int64_t begin, const torch::Tensor& vec) {
    if (!d.defined()) return;
    auto& s = sums_[slot];
    if (slot == kVec) {
      if (!s.defined()) s = torch::zeros_like(vec);
      s.narrow(0, begin, d.size(0)).copy_(d);  // same device
    } else if (!s.defined()) {
      s = d.clone();  // d may alias the incoming gradient
    } else {
      s.add_(d);
    }
  }

  // Undefined where nothing arrived.
  torch::Tensor take(size_t slot) { return std::move(sums_[slot]); }

 private:
  tensor_list sums_;
};

// The slots of `slots` whose gradient the node's backward must return.
std::vector<bool> wanted(AutogradContext* ctx, const tensor_list& slots, size_t read_shift) {
  std::vector<bool> want(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    const size_t edge = i < kReads ? i : i + read_shift;
    want[i] = ctx->needs_input_grad(edge) && slots[i].numel() > 0;
  }
  return want;
}

bool any(const std::vector<bool>& v) { return std::find(v.begin(), v.end(), true) != v.end(); }

// Gradients of the chunked sum under the incoming gradient g, for the slots
// `want` asks (undefined where none arrived), without a graph.
tensor_list first_derivatives(const ChunkedWork& work, const tensor_list& slots,
                              const torch::Tensor& g, const std::vector<bool>& want) {
  GradientSum sum(slots.size());
  torch::AutoGradMode enable(true);
  work.for_each_chunk([&](int64_t begin, int64_t end) {
    auto r = recompute(work, slots, begin, end, want);
    tensor_list inputs;
    std::vector<size_t> of;
    for (size_t i = 0; i < slots.size(); ++i)
      if (want[i]) inputs.push_back(r.inputs[i]), of.push_back(i);
    auto d = torch::autograd::grad({r.out}, inputs, {g}, /*retain_graph=*/false,
                                   /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < d.size(); ++k) sum.add(of[k], d[k], begin, slots[kVec]);
  });
  tensor_list out(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) out[i] = sum.take(i);
  return out;
}

// The first derivatives of a chunked sum as a function of (x, vec, g, reads):
// returns the slots work->returned names, in slot order.
class ChunkedEdgeSumGradient : public torch::autograd::Function<ChunkedEdgeSumGradient> {
 public:
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& vec,
                             const torch::Tensor& g, at::TensorList reads,
                             c10::intrusive_ptr<ChunkedWork> work) {
    tensor_list slots{x, vec};
    slots.insert(slots.end(), reads.begin(), reads.end());
    auto d = first_derivatives(*work, slots, g, work->returned);
    tensor_list out;
    for (size_t i = 0; i < slots.size(); ++i)
      if (work->returned[i]) out.push_back(d[i].defined() ? d[i] : torch::zeros_like(slots[i]));
    tensor_list saved{x, vec, g};
    saved.insert(saved.end(), reads.begin(), reads.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["work"] = c10::IValue::make_capsule(std::move(work));
    ctx->set_materialize_grads(false);
    return out;
  }

  // gg: one incoming gradient per returned slot.  Each chunk is recomputed,
  // its first derivatives taken with a graph, and that graph differentiated
  // under gg for x, vec, g and the reads.
  static tensor_list backward(AutogradContext* ctx, tensor_list gg) {
    if (torch::GradMode::is_enabled())
      throw Error("internal: recomputed edge work has no third derivative");
    auto saved = ctx->get_saved_variables();
    const torch::Tensor g = saved[2];
    tensor_list slots{saved[0], saved[1]};
    slots.insert(slots.end(), saved.begin() + 3, saved.end());
    auto work =
        c10::static_intrusive_pointer_cast<ChunkedWork>(ctx->saved_data["work"].toCapsule());
    const auto& returned = work->returned;
    const auto want = wanted(ctx, slots, /*read_shift=*/1);  // g sits before the reads
    const bool want_g = ctx->needs_input_grad(2);
    tensor_list result(saved.size() + 1);  // + work
    if (!any(want) && !want_g) return result;

    tensor_list incoming(slots.size());
    for (size_t i = 0, k = 0; i < slots.size(); ++i)
      if (returned[i]) incoming[i] = gg[k++];
    std::vector<bool> leaf(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) leaf[i] = returned[i] || want[i];

    GradientSum sum(slots.size() + 1);  // + g, last
    const size_t kG = slots.size();
    torch::AutoGradMode enable(true);
    work->for_each_chunk([&](int64_t begin, int64_t end) {
      auto r = recompute(*work, slots, begin, end, leaf);
      auto g_leaf = g.detach().requires_grad_(want_g);
      tensor_list first_inputs;
      std::vector<size_t> of;
      for (size_t i = 0; i < slots.size(); ++i)
        if (returned[i]) first_inputs.push_back(r.inputs[i]), of.push_back(i);
      auto d = torch::autograd::grad({r.out}, first_inputs, {g_leaf}, /*retain_graph=*/true,
                                     /*create_graph=*/true, /*allow_unused=*/true);
      tensor_list outs, grads;
      for (size_t k = 0; k < d.size(); ++k) {
        const auto& in = incoming[of[k]];
        if (!in.defined() || !d[k].defined() || !d[k].requires_grad()) continue;
        outs.push_back(d[k]);
        grads.push_back(of[k] == kVec ? in.narrow(0, begin, end - begin) : in);
      }
      if (outs.empty()) return;
      tensor_list second_inputs;
      std::vector<size_t> to;
      for (size_t i = 0; i < slots.size(); ++i)
        if (want[i]) second_inputs.push_back(r.inputs[i]), to.push_back(i);
      if (want_g) second_inputs.push_back(g_leaf), to.push_back(kG);
      auto dd = torch::autograd::grad(outs, second_inputs, grads, /*retain_graph=*/false,
                                      /*create_graph=*/false, /*allow_unused=*/true);
      for (size_t k = 0; k < dd.size(); ++k) sum.add(to[k], dd[k], begin, slots[kVec]);
    });
    result[0] = sum.take(kX);
    result[1] = sum.take(kVec);
    result[2] = sum.take(kG);
    for (size_t i = kReads; i < slots.size(); ++i) result[i + 1] = sum.take(i);
    return result;
  }
};

class ChunkedEdgeSum : public torch::autograd::Function<ChunkedEdgeSum> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& vec, at::TensorList reads,
                               c10::intrusive_ptr<ChunkedWork> work,
                               std::vector<int64_t> out_shape) {
    torch::NoGradGuard no_grad;
    auto out = torch::zeros(out_shape, vec.options());
    const std::vector<torch::Tensor> read_list(reads.begin(), reads.end());
    work->for_each_chunk([&](int64_t begin, int64_t end) {
      out.add_(work->contribution(x, vec.narrow(0, begin, end - begin), read_list, begin, end));
    });
    tensor_list saved{x, vec};
    saved.insert(saved.end(), reads.begin(), reads.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["work"] = c10::IValue::make_capsule(std::move(work));
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto slots = ctx->get_saved_variables();
    auto work =
        c10::static_intrusive_pointer_cast<ChunkedWork>(ctx->saved_data["work"].toCapsule());
    const auto want = wanted(ctx, slots, /*read_shift=*/0);
    tensor_list result(slots.size() + 2);  // + work, out_shape
    if (!any(want)) return result;
    if (!torch::GradMode::is_enabled()) {
      auto d = first_derivatives(*work, slots, grads[0], want);
      std::copy(d.begin(), d.end(), result.begin());
      return result;
    }
    // create_graph: the first derivatives as a differentiable function.
    auto gradient_work = c10::make_intrusive<ChunkedWork>(*work);
    gradient_work->returned = want;
    const tensor_list reads(slots.begin() + kReads, slots.end());
    auto d = ChunkedEdgeSumGradient::apply(slots[kX], slots[kVec], grads[0], at::TensorList(reads),
                                           std::move(gradient_work));
    for (size_t i = 0, k = 0; i < slots.size(); ++i)
      if (want[i]) result[i] = d[k++];
    return result;
  }
};

}  // namespace

torch::Tensor chunked_edge_sum(const torch::Tensor& x, const torch::Tensor& vec, int64_t edges,
                               int64_t chunk_edges, const std::vector<int64_t>& out_shape,
                               const std::vector<torch::Tensor>& reads,
                               EdgeContribution contribution) {
  if (chunk_edges <= 0) throw Error("internal: chunked_edge_sum needs a positive chunk size");
  auto work = c10::make_intrusive<ChunkedWork>();
  work->contribution = std::move(contribution);
  work->edges = edges;
  work->chunk = chunk_edges;
  // A TensorList (not a vector) makes each read an input of the autograd node.
  return ChunkedEdgeSum::apply(x.defined() ? x : torch::empty({0}, vec.options()), vec,
                               at::TensorList(reads), std::move(work), out_shape);
}

}  // namespace uma::edges
