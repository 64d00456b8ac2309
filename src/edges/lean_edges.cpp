#include "edges/lean_edges.h"

#include <ATen/record_function.h>

#include "edges/lean_launchers.h"
#include "core/uma_error.h"

namespace uma::edges {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Each operator's forward and backward is a RecordFunction scope
// "uma::lean::NAME" (tools/op_profile.h times them; free when nothing listens).
#define UMA_LEAN_SCOPE(name) RECORD_FUNCTION("uma::lean::" name, c10::ArrayRef<const c10::IValue>{})

// The double backwards are plain kernels: a third derivative is refused.
void refuse_third_order(const char* op) {
  if (torch::GradMode::is_enabled())
    throw Error(std::string("internal: ") + op + " has no third derivative");
}

MPieces new_pieces(int64_t edges, int64_t channels, const torch::TensorOptions& opts) {
  return {torch::empty({edges, 3, channels}, opts), torch::empty({edges, 4, channels}, opts),
          torch::empty({edges, 2, channels}, opts)};
}

MPieces contiguous(const variable_list& g, size_t first) {
  return {g[first].contiguous(), g[first + 1].contiguous(), g[first + 2].contiguous()};
}

// An adjoint of an output that was not computed (empty) counts as zero.
torch::Tensor or_zeros(const torch::Tensor& a, const torch::Tensor& like) {
  return a.defined() && a.numel() == like.numel() ? a.contiguous() : torch::zeros_like(like);
}

torch::Tensor nothing(const torch::Tensor& like) { return torch::empty({0}, like.options()); }

// ---- rotate_to_edge_frame: out = F(D, x, radial), linear in each ----------

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
    lean_launchers_for(x.device()).rotate_in_grad(D, x, radial, {g0, g1, g2}, ix, gD, gradial, gx);
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
    const auto& launch = lean_launchers_for(x.device());
    const auto aD = or_zeros(a[0], D), ax = or_zeros(a[1], x), ar = or_zeros(a[2], radial);
    variable_list out(15);
    if (ctx->needs_input_grad(0) || ctx->needs_input_grad(2)) {
      auto dD = ctx->needs_input_grad(0) ? torch::zeros_like(D) : torch::Tensor();
      auto dr = torch::empty_like(radial);
      launch.rotate_in_grad_edges_tangent(D, aD, x, ax, radial, ar, g, ix, dD, dr);
      if (ctx->needs_input_grad(0)) out[0] = dD;
      if (ctx->needs_input_grad(2)) out[2] = dr;
    }
    if (ctx->needs_input_grad(1)) {
      auto dx = torch::zeros_like(x);
      launch.rotate_in_grad_nodes_tangent(D, aD, radial, ar, g, ix, dx);
      out[1] = dx;
    }
    if (ctx->needs_input_grad(3) || ctx->needs_input_grad(4) || ctx->needs_input_grad(5)) {
      auto dg = new_pieces(D.size(0), 2 * x.size(2), x.options());
      launch.rotate_in_tangent(D, aD, x, ax, radial, ar, ix, dg);
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
    lean_launchers_for(x.device())
        .rotate_in(D, x, radial, {src, tgt, src_order, src_offsets, tgt_order, tgt_offsets}, out);
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

// ---- gate_m_pieces: elementwise, linear in nothing --------------------------

// (gy0, gy1, gy2) = the gradient of the gate at y along gq; differentiable
// by the gate's second derivatives (kernels::gate_grad_grad).  sig: the
// sigmoids of y0's first 3H columns (a function of y0, differentiated as such).
class GateMPiecesGrad : public torch::autograd::Function<GateMPiecesGrad> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& y0,
                               const torch::Tensor& y1, const torch::Tensor& y2,
                               const torch::Tensor& sig, const torch::Tensor& g0,
                               const torch::Tensor& g1, const torch::Tensor& g2) {
    UMA_LEAN_SCOPE("gate_m_pieces_grad");
    auto gy0 = torch::empty({y0.size(0), 5 * y1.size(2)}, y0.options());
    MPieces gy{torch::Tensor(), torch::empty_like(y1), torch::empty_like(y2)};
    lean_launchers_for(y0.device())
        .gate_grad(y0, {torch::Tensor(), y1, y2}, sig, {g0, g1, g2}, gy0, gy);
    ctx->save_for_backward({y0, y1, y2, sig, g0, g1, g2});
    return {gy0, gy[1], gy[2]};
  }

  static variable_list backward(AutogradContext* ctx, variable_list a) {
    UMA_LEAN_SCOPE("gate_m_pieces_grad_backward");
    refuse_third_order("gate_m_pieces");
    const auto s = ctx->get_saved_variables();
    const auto &y0 = s[0], &y1 = s[1], &y2 = s[2], &sig = s[3];
    const int64_t E = y0.size(0), H = y1.size(2);
    auto dy0 = torch::empty({E, 5 * H}, y0.options());
    MPieces dy{torch::Tensor(), torch::empty_like(y1), torch::empty_like(y2)};
    auto dg = new_pieces(E, H, y0.options());
    lean_launchers_for(y0.device())
        .gate_grad_grad(y0, {torch::Tensor(), y1, y2}, sig, {s[4], s[5], s[6]}, a[0].contiguous(),
                        {torch::Tensor(), a[1].contiguous(), a[2].contiguous()}, dg, dy0, dy);
    return {dy0, dy[1], dy[2], torch::Tensor(), dg[0], dg[1], dg[2]};
  }
};

// The sigmoids of the logits, [E, 3H]: l1, l2 and the l0m0 row.
torch::Tensor gate_sigmoids(const torch::Tensor& y0, int64_t H) {
  return torch::sigmoid(y0.narrow(1, 0, 3 * H));
}

// Saves its inputs, and the sigmoids unless `recompute` (then made again in
// the backward).  Either way they enter GateMPiecesGrad as constants: its
// double backward differentiates them through y0 itself.
class GateMPieces : public torch::autograd::Function<GateMPieces> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& y0,
                               const torch::Tensor& y1, const torch::Tensor& y2, bool recompute) {
    UMA_LEAN_SCOPE("gate_m_pieces");
    const int64_t E = y0.size(0), H = y1.size(2);
    auto sig = gate_sigmoids(y0, H);
    auto q = new_pieces(E, H, y1.options());
    lean_launchers_for(y0.device()).gate(y0, {torch::Tensor(), y1, y2}, sig, q);
    ctx->save_for_backward({y0, y1, y2, recompute ? nothing(sig) : sig});
    ctx->saved_data["recompute"] = recompute;
    return {q[0], q[1], q[2]};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    UMA_LEAN_SCOPE("gate_m_pieces_backward");
    const auto s = ctx->get_saved_variables();
    const auto g = contiguous(grads, 0);
    torch::Tensor sig = s[3];
    if (ctx->saved_data["recompute"].toBool()) {
      torch::NoGradGuard constant;
      sig = gate_sigmoids(s[0], s[1].size(2));
    }
    auto d = GateMPiecesGrad::apply(s[0], s[1], s[2], sig, g[0], g[1], g[2]);
    return {d[0], d[1], d[2], torch::Tensor()};
  }
};

// ---- rotate_to_nodes_summed: out = R(D, envelope, y), linear in each --------

int rows_of_pieces(const torch::Tensor& y1) { return y1.numel() > 0 ? 9 : 3; }

// The index R reads: each edge's target and the segments by target.
LeanIndex by_target(const torch::Tensor& tgt, const torch::Tensor& order,
                    const torch::Tensor& offsets) {
  return {{}, tgt, {}, {}, order, offsets};
}

// (gD, genvelope, gy0, gy1, gy2) = the gradient of R along g; gy1 and gy2
// empty where R read 3 rows.  Differentiable: R depends on D and the envelope
// through their product M = envelope D only.
class RotateToNodesSummedGrad : public torch::autograd::Function<RotateToNodesSummedGrad> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& D,
                               const torch::Tensor& envelope, const torch::Tensor& y0,
                               const torch::Tensor& y1, const torch::Tensor& y2,
                               const torch::Tensor& g, const torch::Tensor& tgt,
                               const torch::Tensor& order, const torch::Tensor& offsets,
                               bool want_geometry) {
    UMA_LEAN_SCOPE("rotate_to_nodes_summed_grad");
    const int rows = rows_of_pieces(y1);
    auto gD = want_geometry ? torch::zeros_like(D) : nothing(D);
    auto genv = want_geometry ? torch::empty_like(envelope) : nothing(envelope);
    MPieces gy{torch::empty({D.size(0), 3, y0.size(2)}, y0.options()),
               rows == 9 ? torch::empty_like(y1) : nothing(y1),
               rows == 9 ? torch::empty_like(y2) : nothing(y2)};
    lean_launchers_for(g.device())
        .rotate_out_grad(D, envelope, {y0, y1, y2}, rows, by_target(tgt, order, offsets), g, gy, gD,
                         genv);
    ctx->save_for_backward({D, envelope, y0, y1, y2, g, tgt, order, offsets});
    return {gD, genv, gy[0], gy[1], gy[2]};
  }

  // a = (aD, aenv, ay), the adjoints of (gD, genvelope, gy).  With
  // M1 = envelope aD + aenv D, A = G_M(y, g) and B = G_M(ay, g) (the gradient
  // of <g, R> with respect to M): d/dg = R(M1, 1, y) + R(D, envelope, ay);
  // d/dy = G_y(M1, g); d/dD = aenv A + envelope B; d/denvelope = <aD, A> + <D, B>.
  static variable_list backward(AutogradContext* ctx, variable_list a) {
    UMA_LEAN_SCOPE("rotate_to_nodes_summed_grad_backward");
    refuse_third_order("rotate_to_nodes_summed");
    const auto s = ctx->get_saved_variables();
    const auto &D = s[0], &envelope = s[1], &g = s[5];
    const MPieces y{s[2], s[3], s[4]};
    const LeanIndex ix = by_target(s[6], s[7], s[8]);
    const auto& launch = lean_launchers_for(g.device());
    const int rows = rows_of_pieces(y[1]);
    const auto aD = or_zeros(a[0], D), aenv = or_zeros(a[1], envelope);
    const MPieces ay{or_zeros(a[2], y[0]), rows == 9 ? or_zeros(a[3], y[1]) : torch::Tensor(),
                     rows == 9 ? or_zeros(a[4], y[2]) : torch::Tensor()};
    variable_list out(10);
    MPieces dy{torch::empty_like(y[0]), rows == 9 ? torch::empty_like(y[1]) : torch::Tensor(),
               rows == 9 ? torch::empty_like(y[2]) : torch::Tensor()};
    const bool geometry = ctx->needs_input_grad(0) || ctx->needs_input_grad(1);
    auto dD = geometry ? torch::zeros_like(D) : torch::Tensor();
    auto denv = geometry ? torch::empty_like(envelope) : torch::Tensor();
    launch.rotate_out_grad_tangent(D, aD, envelope, aenv, y, ay, rows, ix, g, dy, dD, denv);
    if (ctx->needs_input_grad(5)) {
      auto dg = torch::zeros_like(g);
      launch.rotate_out_tangent(D, aD, envelope, aenv, y, ay, rows, ix, dg);
      out[5] = dg;
    }
    out[0] = dD;
    out[1] = denv;
    for (int i = 0; i < 3; ++i) out[2 + i] = dy[i];
    return out;
  }
};

class RotateToNodesSummed : public torch::autograd::Function<RotateToNodesSummed> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& D,
                               const torch::Tensor& envelope, const torch::Tensor& y0,
                               const torch::Tensor& y1, const torch::Tensor& y2,
                               const torch::Tensor& tgt, const torch::Tensor& order,
                               const torch::Tensor& offsets, int64_t nodes) {
    UMA_LEAN_SCOPE("rotate_to_nodes_summed");
    auto out = torch::zeros({nodes, 9, y0.size(2)}, y0.options());
    lean_launchers_for(y0.device())
        .rotate_out(D, envelope, {y0, y1, y2}, rows_of_pieces(y1), by_target(tgt, order, offsets),
                    out);
    ctx->save_for_backward({D, envelope, y0, y1, y2, tgt, order, offsets});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    UMA_LEAN_SCOPE("rotate_to_nodes_summed_backward");
    const auto s = ctx->get_saved_variables();
    const bool geometry = ctx->needs_input_grad(0) || ctx->needs_input_grad(1);
    auto r = RotateToNodesSummedGrad::apply(s[0], s[1], s[2], s[3], s[4], grads[0].contiguous(),
                                            s[5], s[6], s[7], geometry);
    const bool all_rows = rows_of_pieces(s[3]) == 9;
    return {geometry ? r[0] : torch::Tensor(),
            geometry ? r[1] : torch::Tensor(),
            r[2],
            all_rows ? r[3] : torch::Tensor(),
            all_rows ? r[4] : torch::Tensor(),
            {},
            {},
            {},
            {}};
  }
};

// The operators' tensors on one device, with launchers there.
void check_device(const torch::Tensor& t, std::initializer_list<torch::Tensor> others,
                  const char* op) {
  lean_launchers_for(t.device());
  for (const auto& o : others)
    if (o.defined() && o.numel() > 0 && o.device() != t.device())
      throw Error(std::string("internal: ") + op + "'s tensors are on " + t.device().str() +
                  " and " + o.device().str());
}

}  // namespace

const LeanLaunchers& lean_launchers_for(const torch::Device& device) {
  if (device.is_cpu()) return cpu_lean_launchers();
  if (device.is_cuda()) {
    if (const LeanLaunchers* cuda = cuda_lean_launchers()) return *cuda;
    throw Error(
        "the lean edge operators on CUDA need an engine built with nvcc "
        "(edge_ops reference runs on every device)");
  }
  throw Error("the lean edge operators run on the CPU and on CUDA, not on " + device.str());
}

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

MPieces gate_m_pieces(const torch::Tensor& y0, const torch::Tensor& y1, const torch::Tensor& y2,
                      GateSigmoids sigmoids) {
  check_device(y0, {y1, y2}, "gate_m_pieces");
  if (y0.size(1) != 5 * y1.size(2))
    throw Error("internal: gate_m_pieces needs 2H logits and 3 rows of H");
  auto out = GateMPieces::apply(y0.stride(1) == 1 ? y0 : y0.contiguous(), y1.contiguous(),
                                y2.contiguous(), sigmoids == GateSigmoids::kRecomputed);
  return {out[0], out[1], out[2]};
}

torch::Tensor rotate_to_nodes_summed(const torch::Tensor& D, const torch::Tensor& envelope,
                                     const MPieces& pieces, const torch::Tensor& tgt,
                                     const EdgeSegments& by_target, int64_t nodes) {
  check_device(pieces[0], {D, envelope, pieces[1], pieces[2], tgt, by_target.order},
               "rotate_to_nodes_summed");
  // Autograd functions take no undefined inputs: absent pieces are empty.
  auto present = [&](const torch::Tensor& t) {
    return t.defined() ? t : torch::empty({0}, pieces[0].options());
  };
  return RotateToNodesSummed::apply(D.contiguous(), envelope.contiguous(), pieces[0],
                                    present(pieces[1]), present(pieces[2]), tgt.contiguous(),
                                    by_target.order, by_target.offsets, nodes);
}

}  // namespace uma::edges
