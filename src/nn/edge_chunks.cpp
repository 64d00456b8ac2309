#include "nn/edge_chunks.h"

#include <algorithm>

#include "uma_error.h"

namespace uma::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The non-tensor state of one chunked sum, kept on the autograd node.
struct ChunkedWork : torch::CustomClassHolder {
  EdgeContribution contribution;
  int64_t edges = 0, chunk = 0;
};

class ChunkedEdgeSum : public torch::autograd::Function<ChunkedEdgeSum> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& vec, c10::intrusive_ptr<ChunkedWork> work,
                               std::vector<int64_t> out_shape) {
    torch::NoGradGuard no_grad;
    auto out = torch::zeros(out_shape, vec.options());
    for (int64_t begin = 0; begin < work->edges; begin += work->chunk) {
      const int64_t end = std::min(work->edges, begin + work->chunk);
      out.add_(work->contribution(x, vec.narrow(0, begin, end - begin), begin, end));
    }
    ctx->save_for_backward({x, vec});
    ctx->saved_data["work"] = c10::IValue::make_capsule(std::move(work));
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    if (torch::GradMode::is_enabled())
      throw Error(
          "internal: recomputed edge work has no second derivative (training uses the stored "
          "path)");
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& vec = saved[1];
    auto work =
        c10::static_intrusive_pointer_cast<ChunkedWork>(ctx->saved_data["work"].toCapsule());
    const bool want_x = ctx->needs_input_grad(0) && x.numel() > 0;
    const bool want_vec = ctx->needs_input_grad(1);
    const auto& g = grads[0];
    if (!want_x && !want_vec)
      return {torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};

    torch::Tensor gx = want_x ? torch::zeros_like(x) : torch::Tensor();
    std::vector<torch::Tensor> gvec;
    torch::AutoGradMode enable(true);
    for (int64_t begin = 0; begin < work->edges; begin += work->chunk) {
      const int64_t end = std::min(work->edges, begin + work->chunk);
      auto x_leaf = x.detach().requires_grad_(want_x);
      auto vec_leaf = vec.narrow(0, begin, end - begin).detach().requires_grad_(want_vec);
      auto y = work->contribution(x_leaf, vec_leaf, begin, end);
      std::vector<torch::Tensor> inputs;
      if (want_x) inputs.push_back(x_leaf);
      if (want_vec) inputs.push_back(vec_leaf);
      auto d =
          torch::autograd::grad({y}, inputs, {g}, /*retain_graph=*/false, /*create_graph=*/false,
                                /*allow_unused=*/true);
      if (want_x && d[0].defined()) gx.add_(d[0]);
      if (want_vec) {
        const auto& dv = d.back();
        gvec.push_back(dv.defined() ? dv : torch::zeros_like(vec_leaf));
      }
    }
    torch::Tensor gv;
    if (want_vec) {
      if (work->edges < vec.size(0))
        gvec.push_back(torch::zeros_like(vec.narrow(0, work->edges, vec.size(0) - work->edges)));
      gv = gvec.empty() ? torch::zeros_like(vec) : torch::cat(gvec, 0);
    }
    return {gx, gv, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor chunked_edge_sum(const torch::Tensor& x, const torch::Tensor& vec, int64_t edges,
                               int64_t chunk_edges, const std::vector<int64_t>& out_shape,
                               EdgeContribution contribution) {
  if (chunk_edges <= 0) throw Error("internal: chunked_edge_sum needs a positive chunk size");
  auto work = c10::make_intrusive<ChunkedWork>();
  work->contribution = std::move(contribution);
  work->edges = edges;
  work->chunk = chunk_edges;
  return ChunkedEdgeSum::apply(x.defined() ? x : torch::empty({0}, vec.options()), vec,
                               std::move(work), out_shape);
}

}  // namespace uma::nn
