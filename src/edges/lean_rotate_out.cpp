// rotate_to_nodes_summed (edges/lean_edges.h): its autograd functions, first
// and second derivatives, over the ops of edges/kernels/rotate_out_ops.h.
#include "edges/lean_autograd.h"

namespace uma::edges {
namespace {

using namespace lean;  // NOLINT(google-build-using-namespace): the operators' shared parts

// ---- rotate_to_nodes_summed: out = R(D, envelope, y), linear in each --------

int rows_of_pieces(const torch::Tensor& y1) { return y1.numel() > 0 ? 9 : 3; }

// out (accumulated) += R(D, envelope, y) over `rows` M rows, or, with dD,
// R's tangent along (dD, denvelope, dy); over each node's edges by target.
void rotate_out(const torch::Tensor& D, const torch::Tensor& dD, const torch::Tensor& envelope,
                const torch::Tensor& denvelope, const MPieces& y, const MPieces& dy, int rows,
                const torch::Tensor& order, const torch::Tensor& offsets,
                const torch::Tensor& out) {
  for_scalar(out, [&](auto t) {
    using T = decltype(t);
    launch::run(kernels::RotateOutNodesOp<T>{data_in<T>(D), data_in<T>(dD), data_in<T>(envelope),
                                             data_in<T>(denvelope), rows_of<const T>(y),
                                             rows_of<const T>(dy), rows, data_in<int64_t>(order),
                                             data_in<int64_t>(offsets), D.size(0), out.size(2),
                                             out.size(0), data_of<T>(out)},
                out.device());
  });
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
    for_scalar(g, [&](auto t) {
      using T = decltype(t);
      launch::run(
          kernels::RotateOutGradOp<T>{data_in<T>(D), data_in<T>(envelope),
                                      rows_of<const T>({y0, y1, y2}), rows, data_in<int64_t>(tgt),
                                      data_in<T>(g), g.size(2), D.size(0), rows_of<T>(gy),
                                      data_of<T>(gD), data_of<T>(genv)},
          g.device());
    });
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
    const auto &tgt = s[6], &order = s[7], &offsets = s[8];
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
    for_scalar(g, [&](auto t) {
      using T = decltype(t);
      launch::run(
          kernels::RotateOutGradTangentOp<T>{
              data_in<T>(D), data_in<T>(aD), data_in<T>(envelope), data_in<T>(aenv),
              rows_of<const T>(y), rows_of<const T>(ay), rows, data_in<int64_t>(tgt), data_in<T>(g),
              g.size(2), D.size(0), rows_of<T>(dy), data_of<T>(dD), data_of<T>(denv)},
          g.device());
    });
    if (ctx->needs_input_grad(5)) {
      auto dg = torch::zeros_like(g);
      rotate_out(D, aD, envelope, aenv, y, ay, rows, order, offsets, dg);
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
    rotate_out(D, torch::Tensor(), envelope, torch::Tensor(), {y0, y1, y2}, {}, rows_of_pieces(y1),
               order, offsets, out);
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

}  // namespace

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
