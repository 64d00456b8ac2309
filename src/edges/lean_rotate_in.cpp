// rotate_to_edge_frame (edges/lean_edges.h): its autograd functions, first
// and second derivatives, over the ops of edges/kernels/rotate_in_ops.h and
// rotate_in_grad_ops.h.
#include "edges/lean_autograd.h"

namespace uma::edges {
namespace {

using namespace lean;  // NOLINT(google-build-using-namespace): the operators' shared parts

// ---- rotate_to_edge_frame: out = F(D, x, radial), linear in each ----------

// The graph the operators run over: edges [E] and their segments by source
// and by target (possibly over a longer graph: entries >= E are skipped).
struct LeanIndex {
  torch::Tensor src, tgt;
  torch::Tensor src_order, src_offsets, tgt_order, tgt_offsets;

  kernels::NodeWalk walk(int64_t edges, const torch::Tensor& gx) const {
    return {data_in<int64_t>(src_order),
            data_in<int64_t>(src_offsets),
            data_in<int64_t>(tgt_order),
            data_in<int64_t>(tgt_offsets),
            edges,
            gx.size(2),
            gx.size(0)};
  }
};

// Whether the CPU sums x's gradient in rotate_in_grad's edge pass (one pass
// over g and the radial weights instead of two): while the threads' own gx
// buffers stay small (they are zeroed and summed each call).  CUDA takes the
// node pass, and so does the CPU where sums run in segments (edge_segments.h).
bool sums_nodes_per_thread(const torch::Tensor& gx) {
  constexpr int64_t kBudgetBytes = 32 << 20;
  return !sums_in_segments(gx.device()) &&
         at::get_num_threads() * gx.numel() * gx.element_size() <= kBudgetBytes;
}

// F's gradient along g: gD (accumulated; only with gradial), gradial
// (written), gx (accumulated).
void rotate_in_grad(const torch::Tensor& D, const torch::Tensor& x, const torch::Tensor& radial,
                    const MPieces& g, const LeanIndex& ix, const torch::Tensor& gD,
                    const torch::Tensor& gradial, const torch::Tensor& gx) {
  const int64_t E = D.size(0), C = x.size(2);
  const bool want_x = gx.defined() && gx.numel() > 0;
  const bool edges = gradial.defined() && gradial.numel() > 0;
  const bool one_pass = want_x && edges && sums_nodes_per_thread(gx);
  for_scalar(x, [&](auto t) {
    using T = decltype(t);
    const auto grows = rows_of<const T>(g);
    if (edges) {
      auto per_thread = one_pass
                            ? torch::zeros({at::get_num_threads(), gx.size(0), 9, C}, gx.options())
                            : torch::Tensor();
      launch::run(
          kernels::RotateInGradEdgesOp<T>{data_in<T>(D), data_in<T>(x), data_in<int64_t>(ix.src),
                                          data_in<int64_t>(ix.tgt), data_in<T>(radial), grows, C, E,
                                          data_of<T>(gD), data_of<T>(gradial),
                                          data_of<T>(per_thread), gx.numel()},
          x.device());
      if (one_pass) gx.add_(per_thread.sum(0));
    }
    if (want_x && !one_pass)
      launch::run(kernels::RotateInGradNodesOp<T>{ix.walk(E, gx), data_in<T>(D), data_in<T>(radial),
                                                  grows, data_of<T>(gx)},
                  x.device());
  });
}

LeanIndex index_of(const std::vector<torch::Tensor>& t, size_t first) {
  return {t[first], t[first + 1], t[first + 2], t[first + 3], t[first + 4], t[first + 5]};
}

// (gD, gx, gradial) = the gradient of F at (D, x, radial) along g; itself
// differentiable, by F's tangents and gradients.  Outputs not wanted are empty.
class RotateToEdgeFrameGrad : public torch::autograd::Function<RotateToEdgeFrameGrad> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& D, const torch::Tensor& x,
                               const torch::Tensor& radial, const torch::Tensor& g0,
                               const torch::Tensor& g1, const torch::Tensor& g2,
                               const torch::Tensor& src, const torch::Tensor& tgt,
                               const torch::Tensor& src_order, const torch::Tensor& src_offsets,
                               const torch::Tensor& tgt_order, const torch::Tensor& tgt_offsets,
                               bool want_D, bool want_radial, bool want_x) {
    UMA_LEAN_SCOPE("rotate_to_edge_frame_grad");
    const LeanIndex ix{src, tgt, src_order, src_offsets, tgt_order, tgt_offsets};
    torch::Tensor gD = nothing(D), gradial = nothing(radial), gx = nothing(x);
    if (want_x) gx = torch::zeros_like(x);
    if (want_D) gD = torch::zeros_like(D);
    // the kernel for D writes the radial weights' gradient too
    if (want_D || want_radial) gradial = torch::empty_like(radial);
    rotate_in_grad(D, x, radial, {g0, g1, g2}, ix, gD, gradial, gx);
    ctx->save_for_backward(
        {D, x, radial, g0, g1, g2, src, tgt, src_order, src_offsets, tgt_order, tgt_offsets});
    return {gD, gx, gradial};
  }

  // a = (aD, ax, aradial), the adjoints of (gD, gx, gradial).  With T the
  // form <g, F(D, x, radial)>: d/dg = F(aD, x, r) + F(D, ax, r) + F(D, x, ar);
  // d/dD = T(., ax, r, g) + T(., x, ar, g); d/dx = T(aD, ., r, g) + T(D, ., ar, g);
  // d/dradial = T(D, ax, ., g) + T(aD, x, ., g).
  static variable_list backward(AutogradContext* ctx, variable_list a) {
    UMA_LEAN_SCOPE("rotate_to_edge_frame_grad_backward");
    refuse_third_order("rotate_to_edge_frame");
    const auto s = ctx->get_saved_variables();
    const auto &D = s[0], &x = s[1], &radial = s[2];
    const MPieces g{s[3], s[4], s[5]};
    const LeanIndex ix = index_of(s, 6);
    const auto aD = or_zeros(a[0], D), ax = or_zeros(a[1], x), ar = or_zeros(a[2], radial);
    const int64_t E = D.size(0), C = x.size(2);
    variable_list out(15);
    if (ctx->needs_input_grad(0) || ctx->needs_input_grad(2)) {
      auto dD = ctx->needs_input_grad(0) ? torch::zeros_like(D) : torch::Tensor();
      auto dr = torch::empty_like(radial);
      for_scalar(x, [&](auto t) {
        using T = decltype(t);
        launch::run(
            kernels::RotateInGradEdgesTangentOp<T>{
                data_in<T>(D), data_in<T>(aD), data_in<T>(x), data_in<T>(ax),
                data_in<int64_t>(ix.src), data_in<int64_t>(ix.tgt), data_in<T>(radial),
                data_in<T>(ar), rows_of<const T>(g), C, E, data_of<T>(dD), data_of<T>(dr)},
            x.device());
      });
      if (ctx->needs_input_grad(0)) out[0] = dD;
      if (ctx->needs_input_grad(2)) out[2] = dr;
    }
    if (ctx->needs_input_grad(1)) {
      auto dx = torch::zeros_like(x);
      for_scalar(x, [&](auto t) {
        using T = decltype(t);
        launch::run(
            kernels::RotateInGradNodesTangentOp<T>{ix.walk(E, dx), data_in<T>(D), data_in<T>(aD),
                                                   data_in<T>(radial), data_in<T>(ar),
                                                   rows_of<const T>(g), data_of<T>(dx)},
            x.device());
      });
      out[1] = dx;
    }
    if (ctx->needs_input_grad(3) || ctx->needs_input_grad(4) || ctx->needs_input_grad(5)) {
      auto dg = new_pieces(D.size(0), 2 * x.size(2), x.options());
      for_scalar(x, [&](auto t) {
        using T = decltype(t);
        launch::run(kernels::RotateInTangentOp<T>{data_in<T>(D), data_in<T>(aD), data_in<T>(x),
                                                  data_in<T>(ax), data_in<int64_t>(ix.src),
                                                  data_in<int64_t>(ix.tgt), data_in<T>(radial),
                                                  data_in<T>(ar), rows_of<T>(dg), C, E},
                    x.device());
      });
      for (int i = 0; i < 3; ++i) out[3 + i] = dg[i];
    }
    return out;
  }
};

class RotateToEdgeFrame : public torch::autograd::Function<RotateToEdgeFrame> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& D, const torch::Tensor& x,
                               const torch::Tensor& radial, const torch::Tensor& src,
                               const torch::Tensor& tgt, const torch::Tensor& src_order,
                               const torch::Tensor& src_offsets, const torch::Tensor& tgt_order,
                               const torch::Tensor& tgt_offsets) {
    UMA_LEAN_SCOPE("rotate_to_edge_frame");
    auto out = new_pieces(D.size(0), 2 * x.size(2), x.options());
    for_scalar(x, [&](auto t) {
      using T = decltype(t);
      launch::run(kernels::RotateInOp<T>{data_in<T>(D), data_in<T>(x), data_in<int64_t>(src),
                                         data_in<int64_t>(tgt), data_in<T>(radial), rows_of<T>(out),
                                         x.size(2), D.size(0)},
                  x.device());
    });
    ctx->save_for_backward(
        {D, x, radial, src, tgt, src_order, src_offsets, tgt_order, tgt_offsets});
    return {out[0], out[1], out[2]};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    UMA_LEAN_SCOPE("rotate_to_edge_frame_backward");
    const auto s = ctx->get_saved_variables();
    const auto g = contiguous(grads, 0);
    const bool want_x = ctx->needs_input_grad(1);
    auto r = RotateToEdgeFrameGrad::apply(s[0], s[1], s[2], g[0], g[1], g[2], s[3], s[4], s[5],
                                          s[6], s[7], s[8], ctx->needs_input_grad(0),
                                          ctx->needs_input_grad(2), want_x);
    return {ctx->needs_input_grad(0) ? r[0] : torch::Tensor(),
            want_x ? r[1] : torch::Tensor(),
            ctx->needs_input_grad(2) ? r[2] : torch::Tensor(),
            {},
            {},
            {},
            {},
            {},
            {}};
  }
};

}  // namespace

MPieces rotate_to_edge_frame(const torch::Tensor& D, const torch::Tensor& x,
                             const torch::Tensor& src, const torch::Tensor& tgt,
                             const torch::Tensor& radial, const EdgeSegments& by_source,
                             const EdgeSegments& by_target) {
  check_device(x, {D, src, tgt, radial, by_source.order, by_target.order}, "rotate_to_edge_frame");
  auto out = RotateToEdgeFrame::apply(D.contiguous(), x.contiguous(), radial.contiguous(),
                                      src.contiguous(), tgt.contiguous(), by_source.order,
                                      by_source.offsets, by_target.order, by_target.offsets);
  return {out[0], out[1], out[2]};
}

}  // namespace uma::edges
