#include "nn/lean_edges.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "nn/lean_edge_kernels.h"
#include "uma_error.h"

namespace uma::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kEdgeGrain = 32, kNodeGrain = 4;

void refuse_second_order(const char* op) {
  if (torch::GradMode::is_enabled())
    throw Error(std::string("internal: ") + op +
                " has no second derivative (training uses the LibTorch ops)");
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

class RotateToEdgeFrame : public torch::autograd::Function<RotateToEdgeFrame> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& D, const torch::Tensor& x,
                               const torch::Tensor& radial, const torch::Tensor& src,
                               const torch::Tensor& tgt, const torch::Tensor& src_order,
                               const torch::Tensor& src_offsets, const torch::Tensor& tgt_order,
                               const torch::Tensor& tgt_offsets) {
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
    refuse_second_order("rotate_to_edge_frame");
    const auto s = ctx->get_saved_variables();
    const auto &D = s[0], &x = s[1], &radial = s[2], &src = s[3], &tgt = s[4];
    const int64_t E = D.size(0), N = x.size(0), C = x.size(2);
    const auto g = contiguous(grads, 0);
    torch::Tensor gD, gx, gradial;
    const bool want_edge = ctx->needs_input_grad(0) || ctx->needs_input_grad(2);
    if (want_edge) {
      gD = torch::zeros_like(D);
      gradial = torch::empty_like(radial);
    }
    if (ctx->needs_input_grad(1)) gx = torch::zeros_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame_backward", [&] {
      const auto grows = rows_of<const scalar_t>(g);
      if (want_edge)
        at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
          kernels::rotate_in_grad_edges(host<scalar_t>(D), host<scalar_t>(x), host<int64_t>(src),
                                        host<int64_t>(tgt), host<scalar_t>(radial), grows, C,
                                        host<scalar_t>(gD), host<scalar_t>(gradial), b, e);
        });
      if (gx.defined())
        at::parallel_for(0, N, kNodeGrain, [&](int64_t b, int64_t e) {
          kernels::rotate_in_grad_nodes(host<scalar_t>(D), host<scalar_t>(radial), grows,
                                        host<int64_t>(s[5]), host<int64_t>(s[6]),
                                        host<int64_t>(s[7]), host<int64_t>(s[8]), E, C,
                                        host<scalar_t>(gx), b, e);
        });
    });
    if (!ctx->needs_input_grad(0)) gD = torch::Tensor();
    if (!ctx->needs_input_grad(2)) gradial = torch::Tensor();
    return {gD, gx, gradial, {}, {}, {}, {}, {}, {}};
  }
};

class GateMPieces : public torch::autograd::Function<GateMPieces> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& y0,
                               const torch::Tensor& y1, const torch::Tensor& y2) {
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
    refuse_second_order("gate_m_pieces");
    const auto s = ctx->get_saved_variables();
    const auto &y0 = s[0], &y1 = s[1], &y2 = s[2], &sig = s[3];
    const int64_t E = y0.size(0), H = y1.size(2);
    const auto g = contiguous(grads, 0);
    auto gy0 = torch::empty({E, 5 * H}, y0.options());
    MPieces gy{torch::Tensor(), torch::empty_like(y1), torch::empty_like(y2)};
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "gate_m_pieces_backward", [&] {
      const auto in = rows_of<const scalar_t>({torch::Tensor(), y1, y2});
      const auto grows = rows_of<const scalar_t>(g);
      const auto out = rows_of<scalar_t>(gy);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::gate_grad(host<scalar_t>(y0), y0.stride(0), in, host<scalar_t>(sig), grows,
                           host<scalar_t>(gy0), out, H, b, e);
      });
    });
    return {gy0, gy[1], gy[2]};
  }
};

class RotateToNodesSummed : public torch::autograd::Function<RotateToNodesSummed> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& D,
                               const torch::Tensor& envelope, const torch::Tensor& y0,
                               const torch::Tensor& y1, const torch::Tensor& y2,
                               const torch::Tensor& tgt, const torch::Tensor& order,
                               const torch::Tensor& offsets, int64_t nodes) {
    const int64_t E = D.size(0), C = y0.size(2);
    const int rows = y1.numel() > 0 ? 9 : 3;
    auto out = torch::zeros({nodes, 9, C}, y0.options());
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "rotate_to_nodes_summed", [&] {
      const auto in = rows_of<const scalar_t>({y0, y1, y2});
      at::parallel_for(0, nodes, kNodeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_out(host<scalar_t>(D), host<scalar_t>(envelope), in, rows,
                            host<int64_t>(order), host<int64_t>(offsets), E, C, host<scalar_t>(out),
                            b, e);
      });
    });
    ctx->save_for_backward({D, envelope, y0, y1, y2, tgt});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    refuse_second_order("rotate_to_nodes_summed");
    const auto s = ctx->get_saved_variables();
    const auto &D = s[0], &envelope = s[1], &y0 = s[2], &y1 = s[3], &y2 = s[4], &tgt = s[5];
    const int64_t E = D.size(0), C = y0.size(2);
    const int rows = y1.numel() > 0 ? 9 : 3;
    const auto g = grads[0].contiguous();
    auto gD = torch::zeros_like(D);
    auto genv = torch::empty_like(envelope);
    MPieces gy{torch::empty({E, 3, C}, y0.options()),
               rows == 9 ? torch::empty_like(y1) : torch::Tensor(),
               rows == 9 ? torch::empty_like(y2) : torch::Tensor()};
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "rotate_to_nodes_summed_backward", [&] {
      const auto in = rows_of<const scalar_t>({y0, y1, y2});
      const auto out = rows_of<scalar_t>(gy);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_out_grad(host<scalar_t>(D), host<scalar_t>(envelope), in, rows,
                                 host<int64_t>(tgt), host<scalar_t>(g), C, out, host<scalar_t>(gD),
                                 host<scalar_t>(genv), b, e);
      });
    });
    return {gD, genv, gy[0], gy[1], gy[2], {}, {}, {}, {}};
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
