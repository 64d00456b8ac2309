#include "edges/lean_edges.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include "edges/cpu/lean_kernels.h"
#include "runtime/uma_error.h"

namespace uma::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kEdgeGrain = 32, kNodeGrain = 4;

// Each operator's forward and backward is a RecordFunction scope
// "uma::lean::NAME" (tools/op_profile.h times them; free when nothing listens).
#define UMA_LEAN_SCOPE(name) RECORD_FUNCTION("uma::lean::" name, c10::ArrayRef<const c10::IValue>{})

// The double backwards are plain kernels: a third derivative is refused.
void refuse_third_order(const char* op) {
  if (torch::GradMode::is_enabled())
    throw Error(std::string("internal: ") + op + " has no third derivative");
}

// Every tensor these operators touch is on the CPU (checked at the entry points).
template <typename T>
T* host(const torch::Tensor& t) {
  return t.data_ptr<T>();  // host data
}

template <typename T>
kernels::Rows<T> rows_of(const MPieces& p) {
  kernels::Rows<T> r;
  for (int i = 0; i < 3; ++i) {
    if (!p[i].defined() || p[i].numel() == 0) continue;
    if (p[i].dim() != 3 || p[i].stride(2) != 1)
      throw Error("internal: an M-layout piece needs contiguous channels");
    r.base[i] = host<std::remove_const_t<T>>(p[i]);
    r.edge_stride[i] = p[i].stride(0);
    r.row_stride[i] = p[i].stride(1);
  }
  return r;
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

// The edge and node gradients of F given the incoming gradient g.
struct RotateIn {
  torch::Tensor src, tgt, src_order, src_offsets, tgt_order, tgt_offsets;

  // gD ([E, 9, 9], accumulated; skipped where empty), gradial (written) and,
  // where defined, gx ([N, 9, C], accumulated; see sums_nodes_per_thread).
  void grad_edges(const torch::Tensor& D, const torch::Tensor& x, const torch::Tensor& radial,
                  const MPieces& g, torch::Tensor& gD, torch::Tensor& gradial,
                  torch::Tensor gx = {}) const {
    const int64_t E = D.size(0), C = x.size(2);
    const int threads = at::get_num_threads();
    // One gx per thread, summed after: a node's edges lie in every thread's range.
    auto per_thread =
        gx.defined() ? torch::zeros({threads, gx.size(0), 9, C}, gx.options()) : torch::Tensor();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame_grad_edges", [&] {
      const auto grows = rows_of<const scalar_t>(g);
      scalar_t* sums = per_thread.defined() ? host<scalar_t>(per_thread) : nullptr;
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        scalar_t* own = sums ? sums + at::get_thread_num() * gx.numel() : nullptr;
        kernels::rotate_in_grad_edges(host<scalar_t>(D), host<scalar_t>(x), host<int64_t>(src),
                                      host<int64_t>(tgt), host<scalar_t>(radial), grows, C,
                                      gD.numel() ? host<scalar_t>(gD) : nullptr,
                                      host<scalar_t>(gradial), own, b, e);
      });
    });
    if (per_thread.defined()) gx.add_(per_thread.sum(0));
  }
  // Whether grad_edges should also sum gx (one pass over g and the radial
  // weights instead of two) rather than grad_nodes: while the threads'
  // buffers stay small (they are zeroed and summed each call).
  static bool sums_nodes_per_thread(const torch::Tensor& gx) {
    constexpr int64_t kBudgetBytes = 32 << 20;
    return at::get_num_threads() * gx.numel() * gx.element_size() <= kBudgetBytes;
  }
  // gx ([N, 9, C], accumulated).
  void grad_nodes(const torch::Tensor& D, const torch::Tensor& radial, const MPieces& g,
                  torch::Tensor& gx) const {
    const int64_t E = D.size(0), N = gx.size(0), C = gx.size(2);
    AT_DISPATCH_FLOATING_TYPES(gx.scalar_type(), "rotate_to_edge_frame_grad_nodes", [&] {
      const auto grows = rows_of<const scalar_t>(g);
      at::parallel_for(0, N, kNodeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_in_grad_nodes(host<scalar_t>(D), host<scalar_t>(radial), grows,
                                      host<int64_t>(src_order), host<int64_t>(src_offsets),
                                      host<int64_t>(tgt_order), host<int64_t>(tgt_offsets), E, C,
                                      host<scalar_t>(gx), b, e);
      });
    });
  }
};

RotateIn rotate_in_of(const std::vector<torch::Tensor>& t, size_t first) {
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
    const RotateIn op{src, tgt, src_order, src_offsets, tgt_order, tgt_offsets};
    const MPieces g{g0, g1, g2};
    torch::Tensor gD = nothing(D), gradial = nothing(radial), gx = nothing(x);
    if (want_x) gx = torch::zeros_like(x);
    // gx in the edge pass where there is one and the threads' sums are small
    const bool one_pass = want_x && (want_D || want_radial) && RotateIn::sums_nodes_per_thread(gx);
    if (want_D || want_radial) {
      if (want_D) gD = torch::zeros_like(D);
      gradial = torch::empty_like(radial);
      op.grad_edges(D, x, radial, g, gD, gradial, one_pass ? gx : torch::Tensor());
    }
    if (want_x && !one_pass) op.grad_nodes(D, radial, g, gx);
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
    const RotateIn op = rotate_in_of(s, 6);
    const auto aD = or_zeros(a[0], D), ax = or_zeros(a[1], x), ar = or_zeros(a[2], radial);
    const int64_t E = D.size(0), C = x.size(2);
    variable_list out(15);
    if (ctx->needs_input_grad(0) || ctx->needs_input_grad(2)) {
      auto dD = ctx->needs_input_grad(0) ? torch::zeros_like(D) : torch::Tensor();
      auto dr = torch::empty_like(radial);
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame_grad_edges_tangent", [&] {
        const auto grows = rows_of<const scalar_t>(g);
        at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
          kernels::rotate_in_grad_edges_tangent(
              host<scalar_t>(D), host<scalar_t>(aD), host<scalar_t>(x), host<scalar_t>(ax),
              host<int64_t>(op.src), host<int64_t>(op.tgt), host<scalar_t>(radial),
              host<scalar_t>(ar), grows, C, dD.defined() ? host<scalar_t>(dD) : nullptr,
              host<scalar_t>(dr), b, e);
        });
      });
      if (ctx->needs_input_grad(0)) out[0] = dD;
      if (ctx->needs_input_grad(2)) out[2] = dr;
    }
    if (ctx->needs_input_grad(1)) {
      auto dx = torch::zeros_like(x);
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame_grad_nodes_tangent", [&] {
        const auto grows = rows_of<const scalar_t>(g);
        at::parallel_for(0, x.size(0), kNodeGrain, [&](int64_t b, int64_t e) {
          kernels::rotate_in_grad_nodes_tangent(
              host<scalar_t>(D), host<scalar_t>(aD), host<scalar_t>(radial), host<scalar_t>(ar),
              grows, host<int64_t>(op.src_order), host<int64_t>(op.src_offsets),
              host<int64_t>(op.tgt_order), host<int64_t>(op.tgt_offsets), E, C, host<scalar_t>(dx),
              b, e);
        });
      });
      out[1] = dx;
    }
    if (ctx->needs_input_grad(3) || ctx->needs_input_grad(4) || ctx->needs_input_grad(5)) {
      auto dg = new_pieces(E, 2 * C, x.options());
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame_tangent", [&] {
        const auto rows = rows_of<scalar_t>(dg);
        at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
          kernels::rotate_in_tangent(host<scalar_t>(D), host<scalar_t>(aD), host<scalar_t>(x),
                                     host<scalar_t>(ax), host<int64_t>(op.src),
                                     host<int64_t>(op.tgt), host<scalar_t>(radial),
                                     host<scalar_t>(ar), rows, C, b, e);
        });
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
    const int64_t E = D.size(0), C = x.size(2);
    auto out = new_pieces(E, 2 * C, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame", [&] {
      const auto rows = rows_of<scalar_t>(out);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_in(host<scalar_t>(D), host<scalar_t>(x), host<int64_t>(src),
                           host<int64_t>(tgt), host<scalar_t>(radial), rows, C, b, e);
      });
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
    const int64_t E = y0.size(0), H = y1.size(2);
    auto gy0 = torch::empty({E, 5 * H}, y0.options());
    MPieces gy{torch::Tensor(), torch::empty_like(y1), torch::empty_like(y2)};
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "gate_m_pieces_backward", [&] {
      const auto in = rows_of<const scalar_t>({torch::Tensor(), y1, y2});
      const auto grows = rows_of<const scalar_t>({g0, g1, g2});
      const auto out = rows_of<scalar_t>(gy);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::gate_grad(host<scalar_t>(y0), y0.stride(0), in, host<scalar_t>(sig), grows,
                           host<scalar_t>(gy0), out, H, b, e);
      });
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
    const auto a0 = a[0].contiguous();
    const MPieces adj{torch::Tensor(), a[1].contiguous(), a[2].contiguous()};
    auto dy0 = torch::empty({E, 5 * H}, y0.options());
    MPieces dy{torch::Tensor(), torch::empty_like(y1), torch::empty_like(y2)};
    auto dg = new_pieces(E, H, y0.options());
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "gate_m_pieces_double_backward", [&] {
      kernels::Rows<const scalar_t> in = rows_of<const scalar_t>({torch::Tensor(), y1, y2});
      const auto grows = rows_of<const scalar_t>({s[4], s[5], s[6]});
      const auto arows = rows_of<const scalar_t>(adj);
      const auto dgrows = rows_of<scalar_t>(dg);
      const auto dyrows = rows_of<scalar_t>(dy);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::gate_grad_grad(host<scalar_t>(y0), y0.stride(0), in, host<scalar_t>(sig), grows,
                                host<scalar_t>(a0), arows, dgrows, host<scalar_t>(dy0), dyrows, H,
                                b, e);
      });
    });
    return {dy0, dy[1], dy[2], torch::Tensor(), dg[0], dg[1], dg[2]};
  }
};

class GateMPieces : public torch::autograd::Function<GateMPieces> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& y0,
                               const torch::Tensor& y1, const torch::Tensor& y2) {
    UMA_LEAN_SCOPE("gate_m_pieces");
    const int64_t E = y0.size(0), H = y1.size(2);
    auto sig = torch::sigmoid(y0.narrow(1, 0, 3 * H));  // logits l1, l2 and the l0m0 row, [E, 3H]
    auto q = new_pieces(E, H, y1.options());
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "gate_m_pieces", [&] {
      const auto in = rows_of<const scalar_t>({torch::Tensor(), y1, y2});
      const auto out = rows_of<scalar_t>(q);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::gate(host<scalar_t>(y0), y0.stride(0), in, host<scalar_t>(sig), out, H, b, e);
      });
    });
    ctx->save_for_backward({y0, y1, y2, sig});
    return {q[0], q[1], q[2]};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    UMA_LEAN_SCOPE("gate_m_pieces_backward");
    const auto s = ctx->get_saved_variables();
    const auto g = contiguous(grads, 0);
    return GateMPiecesGrad::apply(s[0], s[1], s[2], s[3], g[0], g[1], g[2]);
  }
};

// ---- rotate_to_nodes_summed: out = R(D, envelope, y), linear in each --------

struct RotateOut {
  torch::Tensor tgt, order, offsets;

  // out ([nodes, 9, C], accumulated) += R(D, envelope, y) over `rows` rows.
  void sum(const torch::Tensor& D, const torch::Tensor& envelope, const MPieces& y, int rows,
           torch::Tensor& out) const {
    const int64_t E = D.size(0), C = out.size(2);
    AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "rotate_to_nodes_summed", [&] {
      const auto in = rows_of<const scalar_t>(y);
      at::parallel_for(0, out.size(0), kNodeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_out(host<scalar_t>(D), host<scalar_t>(envelope), in, rows,
                            host<int64_t>(order), host<int64_t>(offsets), E, C, host<scalar_t>(out),
                            b, e);
      });
    });
  }
  // gy (written where its pieces are defined), gD (zeroed outside the
  // l-blocks) and genvelope (both skipped where empty) of R along g.
  void grad(const torch::Tensor& D, const torch::Tensor& envelope, const MPieces& y, int rows,
            const torch::Tensor& g, const MPieces& gy, torch::Tensor& gD,
            torch::Tensor& genv) const {
    const int64_t E = D.size(0), C = g.size(2);
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "rotate_to_nodes_summed_backward", [&] {
      const auto in = rows_of<const scalar_t>(y);
      const auto out = rows_of<scalar_t>(gy);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_out_grad(host<scalar_t>(D), host<scalar_t>(envelope), in, rows,
                                 host<int64_t>(tgt), host<scalar_t>(g), C, out,
                                 gD.numel() ? host<scalar_t>(gD) : nullptr,
                                 gD.numel() ? host<scalar_t>(genv) : nullptr, b, e);
      });
    });
  }
};

int rows_of_pieces(const torch::Tensor& y1) { return y1.numel() > 0 ? 9 : 3; }

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
    const int64_t E = D.size(0), C = y0.size(2);
    const int rows = rows_of_pieces(y1);
    auto gD = want_geometry ? torch::zeros_like(D) : nothing(D);
    auto genv = want_geometry ? torch::empty_like(envelope) : nothing(envelope);
    MPieces gy{torch::empty({E, 3, C}, y0.options()),
               rows == 9 ? torch::empty_like(y1) : nothing(y1),
               rows == 9 ? torch::empty_like(y2) : nothing(y2)};
    RotateOut{tgt, order, offsets}.grad(D, envelope, {y0, y1, y2}, rows, g, gy, gD, genv);
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
    const RotateOut op{s[6], s[7], s[8]};
    const int rows = rows_of_pieces(y[1]);
    const auto aD = or_zeros(a[0], D), aenv = or_zeros(a[1], envelope);
    const MPieces ay{or_zeros(a[2], y[0]), rows == 9 ? or_zeros(a[3], y[1]) : torch::Tensor(),
                     rows == 9 ? or_zeros(a[4], y[2]) : torch::Tensor()};
    const int64_t E = D.size(0), C = g.size(2);
    variable_list out(10);
    MPieces dy{torch::empty_like(y[0]), rows == 9 ? torch::empty_like(y[1]) : torch::Tensor(),
               rows == 9 ? torch::empty_like(y[2]) : torch::Tensor()};
    const bool geometry = ctx->needs_input_grad(0) || ctx->needs_input_grad(1);
    auto dD = geometry ? torch::zeros_like(D) : torch::Tensor();
    auto denv = geometry ? torch::empty_like(envelope) : torch::Tensor();
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "rotate_to_nodes_summed_double_backward", [&] {
      const auto yrows = rows_of<const scalar_t>(y), ayrows = rows_of<const scalar_t>(ay);
      const auto dyrows = rows_of<scalar_t>(dy);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_out_grad_tangent(host<scalar_t>(D), host<scalar_t>(aD),
                                         host<scalar_t>(envelope), host<scalar_t>(aenv), yrows,
                                         ayrows, rows, host<int64_t>(op.tgt), host<scalar_t>(g), C,
                                         dyrows, geometry ? host<scalar_t>(dD) : nullptr,
                                         geometry ? host<scalar_t>(denv) : nullptr, b, e);
      });
      if (ctx->needs_input_grad(5)) {
        auto dg = torch::zeros_like(g);
        at::parallel_for(0, g.size(0), kNodeGrain, [&](int64_t b, int64_t e) {
          kernels::rotate_out_tangent(host<scalar_t>(D), host<scalar_t>(aD),
                                      host<scalar_t>(envelope), host<scalar_t>(aenv), yrows, ayrows,
                                      rows, host<int64_t>(op.order), host<int64_t>(op.offsets), E,
                                      C, host<scalar_t>(dg), b, e);
        });
        out[5] = dg;
      }
    });
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
    RotateOut{tgt, order, offsets}.sum(D, envelope, {y0, y1, y2}, rows_of_pieces(y1), out);
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

void check_cpu(const torch::Tensor& t, const char* op) {
  if (!t.device().is_cpu()) throw Error(std::string("internal: ") + op + " runs on the CPU only");
}

}  // namespace

MPieces rotate_to_edge_frame(const torch::Tensor& D, const torch::Tensor& x,
                             const torch::Tensor& src, const torch::Tensor& tgt,
                             const torch::Tensor& radial, const EdgeSegments& by_source,
                             const EdgeSegments& by_target) {
  check_cpu(x, "rotate_to_edge_frame");
  auto out = RotateToEdgeFrame::apply(D.contiguous(), x.contiguous(), radial.contiguous(),
                                      src.contiguous(), tgt.contiguous(), by_source.order,
                                      by_source.offsets, by_target.order, by_target.offsets);
  return {out[0], out[1], out[2]};
}

MPieces gate_m_pieces(const torch::Tensor& y0, const torch::Tensor& y1, const torch::Tensor& y2) {
  check_cpu(y0, "gate_m_pieces");
  if (y0.size(1) != 5 * y1.size(2))
    throw Error("internal: gate_m_pieces needs 2H logits and 3 rows of H");
  auto out = GateMPieces::apply(y0.stride(1) == 1 ? y0 : y0.contiguous(), y1.contiguous(),
                                y2.contiguous());
  return {out[0], out[1], out[2]};
}

torch::Tensor rotate_to_nodes_summed(const torch::Tensor& D, const torch::Tensor& envelope,
                                     const MPieces& pieces, const torch::Tensor& tgt,
                                     const EdgeSegments& by_target, int64_t nodes) {
  check_cpu(pieces[0], "rotate_to_nodes_summed");
  // Autograd functions take no undefined inputs: absent pieces are empty.
  auto present = [&](const torch::Tensor& t) {
    return t.defined() ? t : torch::empty({0}, pieces[0].options());
  };
  return RotateToNodesSummed::apply(D.contiguous(), envelope.contiguous(), pieces[0],
                                    present(pieces[1]), present(pieces[2]), tgt.contiguous(),
                                    by_target.order, by_target.offsets, nodes);
}

}  // namespace uma::nn
