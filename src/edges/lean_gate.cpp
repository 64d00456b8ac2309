// gate_m_pieces (edges/lean_edges.h): its autograd functions, first and
// second derivatives, over the ops of edges/kernels/gate_ops.h.
#include "edges/lean_autograd.h"

namespace uma::edges {
namespace {

using namespace lean;  // NOLINT(google-build-using-namespace): the operators' shared parts

// ---- gate_m_pieces: elementwise, linear in nothing --------------------------

// What every gate kernel reads: y0 [E, 5H] (rows with stride y0.stride(0)),
// y1 and y2 (M rows 3..8), sig = sigmoid(y0[:, :3H]) [E, 3H].
template <typename T>
kernels::GateInput<T> gate_input(const torch::Tensor& y0, const torch::Tensor& y1,
                                 const torch::Tensor& y2, const torch::Tensor& sig) {
  return {data_in<T>(y0),  y0.stride(0), rows_of<const T>({torch::Tensor(), y1, y2}),
          data_in<T>(sig), y1.size(2),   y0.size(0)};
}

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
    for_scalar(y0, [&](auto t) {
      using T = decltype(t);
      launch::run(
          kernels::GateGradOp<T>{gate_input<T>(y0, y1, y2, sig), rows_of<const T>({g0, g1, g2}),
                                 data_of<T>(gy0), rows_of<T>(gy)},
          y0.device());
    });
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
    const auto a0 = a[0].contiguous();
    const MPieces ar{torch::Tensor(), a[1].contiguous(), a[2].contiguous()};
    for_scalar(y0, [&](auto t) {
      using T = decltype(t);
      launch::run(kernels::GateGradGradOp<T>{gate_input<T>(y0, y1, y2, sig),
                                             rows_of<const T>({s[4], s[5], s[6]}), data_in<T>(a0),
                                             rows_of<const T>(ar), rows_of<T>(dg), data_of<T>(dy0),
                                             rows_of<T>(dy)},
                  y0.device());
    });
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
    for_scalar(y0, [&](auto t) {
      using T = decltype(t);
      launch::run(kernels::GateOp<T>{gate_input<T>(y0, y1, y2, sig), rows_of<T>(q)}, y0.device());
    });
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

}  // namespace

MPieces gate_m_pieces(const torch::Tensor& y0, const torch::Tensor& y1, const torch::Tensor& y2,
                      GateSigmoids sigmoids) {
  check_device(y0, {y1, y2}, "gate_m_pieces");
  if (y0.size(1) != 5 * y1.size(2))
    throw Error("internal: gate_m_pieces needs 2H logits and 3 rows of H");
  auto out = GateMPieces::apply(y0.stride(1) == 1 ? y0 : y0.contiguous(), y1.contiguous(),
                                y2.contiguous(), sigmoids == GateSigmoids::kRecomputed);
  return {out[0], out[1], out[2]};
}

}  // namespace uma::edges
