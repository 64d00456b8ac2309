// The lean kernels on the CPU (edges/lean_launchers.h): each over
// at::parallel_for ranges of edges or nodes on LibTorch's intra-op threads.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "edges/cpu/lean_kernels.h"
#include "edges/lean_launchers.h"

namespace uma::edges {
namespace {

constexpr int64_t kEdgeGrain = 32, kNodeGrain = 4;

// Whether rotate_in_grad sums gx in its edge pass (one pass over g and the
// radial weights instead of two): while the threads' own gx buffers stay
// small (they are zeroed and summed each call).
bool sums_nodes_per_thread(const torch::Tensor& gx) {
  constexpr int64_t kBudgetBytes = 32 << 20;
  return at::get_num_threads() * gx.numel() * gx.element_size() <= kBudgetBytes;
}

class CpuLaunchers final : public LeanLaunchers {
 public:
  void rotate_in(const torch::Tensor& D, const torch::Tensor& x, const torch::Tensor& radial,
                 const LeanIndex& ix, const MPieces& result) const override {
    const int64_t E = D.size(0), C = x.size(2);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame", [&] {
      const auto rows = rows_of<scalar_t>(result);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_in(data_in<scalar_t>(D), data_in<scalar_t>(x), data_in<int64_t>(ix.src),
                           data_in<int64_t>(ix.tgt), data_in<scalar_t>(radial), rows, C, b, e);
      });
    });
  }

  void rotate_in_tangent(const torch::Tensor& D, const torch::Tensor& dD, const torch::Tensor& x,
                         const torch::Tensor& dx, const torch::Tensor& radial,
                         const torch::Tensor& dradial, const LeanIndex& ix,
                         const MPieces& result) const override {
    const int64_t E = D.size(0), C = x.size(2);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame_tangent", [&] {
      const auto rows = rows_of<scalar_t>(result);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_in_tangent(
            data_in<scalar_t>(D), data_in<scalar_t>(dD), data_in<scalar_t>(x),
            data_in<scalar_t>(dx), data_in<int64_t>(ix.src), data_in<int64_t>(ix.tgt),
            data_in<scalar_t>(radial), data_in<scalar_t>(dradial), rows, C, b, e);
      });
    });
  }

  void rotate_in_grad(const torch::Tensor& D, const torch::Tensor& x, const torch::Tensor& radial,
                      const MPieces& g, const LeanIndex& ix, const torch::Tensor& gD,
                      const torch::Tensor& gradial, const torch::Tensor& gx) const override {
    const int64_t E = D.size(0), C = x.size(2);
    const bool want_x = gx.defined() && gx.numel() > 0;
    const bool edges = gradial.defined() && gradial.numel() > 0;
    // gx in the edge pass where there is one: one gx per thread, summed
    // after (a node's edges lie in every thread's range).
    const bool one_pass = want_x && edges && sums_nodes_per_thread(gx);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame_grad", [&] {
      const auto grows = rows_of<const scalar_t>(g);
      if (edges) {
        auto per_thread =
            one_pass ? torch::zeros({at::get_num_threads(), gx.size(0), 9, C}, gx.options())
                     : torch::Tensor();
        scalar_t* sums = data_out<scalar_t>(per_thread);
        at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
          scalar_t* own = sums ? sums + at::get_thread_num() * gx.numel() : nullptr;
          kernels::rotate_in_grad_edges(data_in<scalar_t>(D), data_in<scalar_t>(x),
                                        data_in<int64_t>(ix.src), data_in<int64_t>(ix.tgt),
                                        data_in<scalar_t>(radial), grows, C, data_out<scalar_t>(gD),
                                        data_out<scalar_t>(gradial), own, b, e);
        });
        if (one_pass) gx.add_(per_thread.sum(0));
      }
      if (want_x && !one_pass)
        at::parallel_for(0, gx.size(0), kNodeGrain, [&](int64_t b, int64_t e) {
          kernels::rotate_in_grad_nodes(
              data_in<scalar_t>(D), data_in<scalar_t>(radial), grows,
              data_in<int64_t>(ix.src_order), data_in<int64_t>(ix.src_offsets),
              data_in<int64_t>(ix.tgt_order), data_in<int64_t>(ix.tgt_offsets), E, C,
              data_out<scalar_t>(gx), b, e);
        });
    });
  }

  void rotate_in_grad_edges_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                                    const torch::Tensor& x, const torch::Tensor& dx,
                                    const torch::Tensor& radial, const torch::Tensor& dradial,
                                    const MPieces& g, const LeanIndex& ix, const torch::Tensor& gD,
                                    const torch::Tensor& gradial) const override {
    const int64_t E = D.size(0), C = x.size(2);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame_grad_edges_tangent", [&] {
      const auto grows = rows_of<const scalar_t>(g);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_in_grad_edges_tangent(
            data_in<scalar_t>(D), data_in<scalar_t>(dD), data_in<scalar_t>(x),
            data_in<scalar_t>(dx), data_in<int64_t>(ix.src), data_in<int64_t>(ix.tgt),
            data_in<scalar_t>(radial), data_in<scalar_t>(dradial), grows, C, data_out<scalar_t>(gD),
            data_out<scalar_t>(gradial), b, e);
      });
    });
  }

  void rotate_in_grad_nodes_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                                    const torch::Tensor& radial, const torch::Tensor& dradial,
                                    const MPieces& g, const LeanIndex& ix,
                                    const torch::Tensor& gx) const override {
    const int64_t E = D.size(0), C = gx.size(2);
    AT_DISPATCH_FLOATING_TYPES(gx.scalar_type(), "rotate_to_edge_frame_grad_nodes_tangent", [&] {
      const auto grows = rows_of<const scalar_t>(g);
      at::parallel_for(0, gx.size(0), kNodeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_in_grad_nodes_tangent(
            data_in<scalar_t>(D), data_in<scalar_t>(dD), data_in<scalar_t>(radial),
            data_in<scalar_t>(dradial), grows, data_in<int64_t>(ix.src_order),
            data_in<int64_t>(ix.src_offsets), data_in<int64_t>(ix.tgt_order),
            data_in<int64_t>(ix.tgt_offsets), E, C, data_out<scalar_t>(gx), b, e);
      });
    });
  }

  void gate(const torch::Tensor& y0, const MPieces& y, const torch::Tensor& sig,
            const MPieces& q) const override {
    const int64_t E = y0.size(0), H = y[1].size(2);
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "gate_m_pieces", [&] {
      const auto rows = rows_of<const scalar_t>(y);
      const auto qrows = rows_of<scalar_t>(q);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::gate(data_in<scalar_t>(y0), y0.stride(0), rows, data_in<scalar_t>(sig), qrows, H,
                      b, e);
      });
    });
  }

  void gate_grad(const torch::Tensor& y0, const MPieces& y, const torch::Tensor& sig,
                 const MPieces& gq, const torch::Tensor& gy0, const MPieces& gy) const override {
    const int64_t E = y0.size(0), H = y[1].size(2);
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "gate_m_pieces_backward", [&] {
      const auto rows = rows_of<const scalar_t>(y);
      const auto grows = rows_of<const scalar_t>(gq);
      const auto gyrows = rows_of<scalar_t>(gy);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::gate_grad(data_in<scalar_t>(y0), y0.stride(0), rows, data_in<scalar_t>(sig), grows,
                           data_out<scalar_t>(gy0), gyrows, H, b, e);
      });
    });
  }

  void gate_grad_grad(const torch::Tensor& y0, const MPieces& y, const torch::Tensor& sig,
                      const MPieces& gq, const torch::Tensor& a0, const MPieces& a,
                      const MPieces& dgq, const torch::Tensor& dy0,
                      const MPieces& dy) const override {
    const int64_t E = y0.size(0), H = y[1].size(2);
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "gate_m_pieces_double_backward", [&] {
      const auto rows = rows_of<const scalar_t>(y);
      const auto grows = rows_of<const scalar_t>(gq);
      const auto arows = rows_of<const scalar_t>(a);
      const auto dgrows = rows_of<scalar_t>(dgq);
      const auto dyrows = rows_of<scalar_t>(dy);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::gate_grad_grad(data_in<scalar_t>(y0), y0.stride(0), rows, data_in<scalar_t>(sig),
                                grows, data_in<scalar_t>(a0), arows, dgrows,
                                data_out<scalar_t>(dy0), dyrows, H, b, e);
      });
    });
  }

  void rotate_out(const torch::Tensor& D, const torch::Tensor& envelope, const MPieces& y, int rows,
                  const LeanIndex& ix, const torch::Tensor& result) const override {
    const int64_t E = D.size(0), C = result.size(2);
    AT_DISPATCH_FLOATING_TYPES(result.scalar_type(), "rotate_to_nodes_summed", [&] {
      const auto yrows = rows_of<const scalar_t>(y);
      at::parallel_for(0, result.size(0), kNodeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_out(data_in<scalar_t>(D), data_in<scalar_t>(envelope), yrows, rows,
                            data_in<int64_t>(ix.tgt_order), data_in<int64_t>(ix.tgt_offsets), E, C,
                            data_out<scalar_t>(result), b, e);
      });
    });
  }

  void rotate_out_grad(const torch::Tensor& D, const torch::Tensor& envelope, const MPieces& y,
                       int rows, const LeanIndex& ix, const torch::Tensor& g, const MPieces& gy,
                       const torch::Tensor& gD, const torch::Tensor& genvelope) const override {
    const int64_t E = D.size(0), C = g.size(2);
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "rotate_to_nodes_summed_backward", [&] {
      const auto yrows = rows_of<const scalar_t>(y);
      const auto gyrows = rows_of<scalar_t>(gy);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_out_grad(data_in<scalar_t>(D), data_in<scalar_t>(envelope), yrows, rows,
                                 data_in<int64_t>(ix.tgt), data_in<scalar_t>(g), C, gyrows,
                                 data_out<scalar_t>(gD), data_out<scalar_t>(genvelope), b, e);
      });
    });
  }

  void rotate_out_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                          const torch::Tensor& envelope, const torch::Tensor& denvelope,
                          const MPieces& y, const MPieces& dy, int rows, const LeanIndex& ix,
                          const torch::Tensor& result) const override {
    const int64_t E = D.size(0), C = result.size(2);
    AT_DISPATCH_FLOATING_TYPES(result.scalar_type(), "rotate_to_nodes_summed_tangent", [&] {
      const auto yrows = rows_of<const scalar_t>(y), dyrows = rows_of<const scalar_t>(dy);
      at::parallel_for(0, result.size(0), kNodeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_out_tangent(
            data_in<scalar_t>(D), data_in<scalar_t>(dD), data_in<scalar_t>(envelope),
            data_in<scalar_t>(denvelope), yrows, dyrows, rows, data_in<int64_t>(ix.tgt_order),
            data_in<int64_t>(ix.tgt_offsets), E, C, data_out<scalar_t>(result), b, e);
      });
    });
  }

  void rotate_out_grad_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                               const torch::Tensor& envelope, const torch::Tensor& denvelope,
                               const MPieces& y, const MPieces& dy, int rows, const LeanIndex& ix,
                               const torch::Tensor& g, const MPieces& gy2, const torch::Tensor& gD2,
                               const torch::Tensor& genvelope2) const override {
    const int64_t E = D.size(0), C = g.size(2);
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "rotate_to_nodes_summed_double_backward", [&] {
      const auto yrows = rows_of<const scalar_t>(y), dyrows = rows_of<const scalar_t>(dy);
      const auto gyrows = rows_of<scalar_t>(gy2);
      at::parallel_for(0, E, kEdgeGrain, [&](int64_t b, int64_t e) {
        kernels::rotate_out_grad_tangent(data_in<scalar_t>(D), data_in<scalar_t>(dD),
                                         data_in<scalar_t>(envelope), data_in<scalar_t>(denvelope),
                                         yrows, dyrows, rows, data_in<int64_t>(ix.tgt),
                                         data_in<scalar_t>(g), C, gyrows, data_out<scalar_t>(gD2),
                                         data_out<scalar_t>(genvelope2), b, e);
      });
    });
  }
};

}  // namespace

const LeanLaunchers& cpu_lean_launchers() {
  static const CpuLaunchers launchers;
  return launchers;
}

}  // namespace uma::edges
