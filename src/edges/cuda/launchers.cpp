// The lean kernels on CUDA (edges/lean_launchers.h): each one launch (two
// for the x gradient: edges, then nodes) of edges/cuda/*.cu on the current
// stream of the tensors' device, asynchronous, reading nothing back.  Linked
// into the engine where it is compiled with nvcc (CMakeLists.txt,
// UMA_CUDA_EDGES); and, with the kernels emulated on the host, into a CPU test
// of this file's plumbing (tests/test_cuda_launchers.cpp).  Device-generic
// LibTorch only: it needs no CUDA header.
#include <ATen/Dispatch.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "edges/cuda/lean_kernels.h"
#include "edges/lean_launchers.h"

namespace uma::edges {
namespace {

namespace cu = kernels::cuda;

// The device of t made current, and its current stream (a cudaStream_t; null
// for a CPU tensor, which only the host emulation sees).
class OnDevice {
 public:
  explicit OnDevice(const torch::Tensor& t)
      : guard_(t.device()),
        stream_(t.device().is_cuda() ? c10::impl::getDeviceGuardImpl(t.device().type())
                                           ->getStream(t.device())
                                           .native_handle()
                                     : nullptr) {}
  void* stream() const { return stream_; }

 private:
  c10::DeviceGuard guard_;
  void* stream_;
};

class CudaLaunchers final : public LeanLaunchers {
 public:
  void rotate_in(const torch::Tensor& D, const torch::Tensor& x, const torch::Tensor& radial,
                 const LeanIndex& ix, const MPieces& result) const override {
    const OnDevice on(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame", [&] {
      cu::rotate_in(data_in<scalar_t>(D), data_in<scalar_t>(x), data_in<int64_t>(ix.src),
                    data_in<int64_t>(ix.tgt), data_in<scalar_t>(radial), rows_of<scalar_t>(result),
                    x.size(2), D.size(0), on.stream());
    });
  }

  void rotate_in_tangent(const torch::Tensor& D, const torch::Tensor& dD, const torch::Tensor& x,
                         const torch::Tensor& dx, const torch::Tensor& radial,
                         const torch::Tensor& dradial, const LeanIndex& ix,
                         const MPieces& result) const override {
    const OnDevice on(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame_tangent", [&] {
      cu::rotate_in_tangent(
          data_in<scalar_t>(D), data_in<scalar_t>(dD), data_in<scalar_t>(x), data_in<scalar_t>(dx),
          data_in<int64_t>(ix.src), data_in<int64_t>(ix.tgt), data_in<scalar_t>(radial),
          data_in<scalar_t>(dradial), rows_of<scalar_t>(result), x.size(2), D.size(0), on.stream());
    });
  }

  void rotate_in_grad(const torch::Tensor& D, const torch::Tensor& x, const torch::Tensor& radial,
                      const MPieces& g, const LeanIndex& ix, const torch::Tensor& gD,
                      const torch::Tensor& gradial, const torch::Tensor& gx) const override {
    const OnDevice on(x);
    const int64_t E = D.size(0), C = x.size(2);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame_grad", [&] {
      const auto grows = rows_of<const scalar_t>(g);
      if (gradial.defined() && gradial.numel() > 0)
        cu::rotate_in_grad_edges(data_in<scalar_t>(D), data_in<scalar_t>(x),
                                 data_in<int64_t>(ix.src), data_in<int64_t>(ix.tgt),
                                 data_in<scalar_t>(radial), grows, C, data_out<scalar_t>(gD),
                                 data_out<scalar_t>(gradial), E, on.stream());
      if (gx.defined() && gx.numel() > 0)
        cu::rotate_in_grad_nodes(data_in<scalar_t>(D), data_in<scalar_t>(radial), grows,
                                 data_in<int64_t>(ix.src_order), data_in<int64_t>(ix.src_offsets),
                                 data_in<int64_t>(ix.tgt_order), data_in<int64_t>(ix.tgt_offsets),
                                 E, C, data_out<scalar_t>(gx), gx.size(0), on.stream());
    });
  }

  void rotate_in_grad_edges_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                                    const torch::Tensor& x, const torch::Tensor& dx,
                                    const torch::Tensor& radial, const torch::Tensor& dradial,
                                    const MPieces& g, const LeanIndex& ix, const torch::Tensor& gD,
                                    const torch::Tensor& gradial) const override {
    const OnDevice on(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rotate_to_edge_frame_grad_edges_tangent", [&] {
      cu::rotate_in_grad_edges_tangent(
          data_in<scalar_t>(D), data_in<scalar_t>(dD), data_in<scalar_t>(x), data_in<scalar_t>(dx),
          data_in<int64_t>(ix.src), data_in<int64_t>(ix.tgt), data_in<scalar_t>(radial),
          data_in<scalar_t>(dradial), rows_of<const scalar_t>(g), x.size(2), data_out<scalar_t>(gD),
          data_out<scalar_t>(gradial), D.size(0), on.stream());
    });
  }

  void rotate_in_grad_nodes_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                                    const torch::Tensor& radial, const torch::Tensor& dradial,
                                    const MPieces& g, const LeanIndex& ix,
                                    const torch::Tensor& gx) const override {
    const OnDevice on(gx);
    AT_DISPATCH_FLOATING_TYPES(gx.scalar_type(), "rotate_to_edge_frame_grad_nodes_tangent", [&] {
      cu::rotate_in_grad_nodes_tangent(
          data_in<scalar_t>(D), data_in<scalar_t>(dD), data_in<scalar_t>(radial),
          data_in<scalar_t>(dradial), rows_of<const scalar_t>(g), data_in<int64_t>(ix.src_order),
          data_in<int64_t>(ix.src_offsets), data_in<int64_t>(ix.tgt_order),
          data_in<int64_t>(ix.tgt_offsets), D.size(0), gx.size(2), data_out<scalar_t>(gx),
          gx.size(0), on.stream());
    });
  }

  void gate(const torch::Tensor& y0, const MPieces& y, const torch::Tensor& sig,
            const MPieces& q) const override {
    const OnDevice on(y0);
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "gate_m_pieces", [&] {
      cu::gate(data_in<scalar_t>(y0), y0.stride(0), rows_of<const scalar_t>(y),
               data_in<scalar_t>(sig), rows_of<scalar_t>(q), y[1].size(2), y0.size(0), on.stream());
    });
  }

  void gate_grad(const torch::Tensor& y0, const MPieces& y, const torch::Tensor& sig,
                 const MPieces& gq, const torch::Tensor& gy0, const MPieces& gy) const override {
    const OnDevice on(y0);
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "gate_m_pieces_backward", [&] {
      cu::gate_grad(data_in<scalar_t>(y0), y0.stride(0), rows_of<const scalar_t>(y),
                    data_in<scalar_t>(sig), rows_of<const scalar_t>(gq), data_out<scalar_t>(gy0),
                    rows_of<scalar_t>(gy), y[1].size(2), y0.size(0), on.stream());
    });
  }

  void gate_grad_grad(const torch::Tensor& y0, const MPieces& y, const torch::Tensor& sig,
                      const MPieces& gq, const torch::Tensor& a0, const MPieces& a,
                      const MPieces& dgq, const torch::Tensor& dy0,
                      const MPieces& dy) const override {
    const OnDevice on(y0);
    AT_DISPATCH_FLOATING_TYPES(y0.scalar_type(), "gate_m_pieces_double_backward", [&] {
      cu::gate_grad_grad(data_in<scalar_t>(y0), y0.stride(0), rows_of<const scalar_t>(y),
                         data_in<scalar_t>(sig), rows_of<const scalar_t>(gq), data_in<scalar_t>(a0),
                         rows_of<const scalar_t>(a), rows_of<scalar_t>(dgq),
                         data_out<scalar_t>(dy0), rows_of<scalar_t>(dy), y[1].size(2), y0.size(0),
                         on.stream());
    });
  }

  void rotate_out(const torch::Tensor& D, const torch::Tensor& envelope, const MPieces& y, int rows,
                  const LeanIndex& ix, const torch::Tensor& result) const override {
    const OnDevice on(result);
    AT_DISPATCH_FLOATING_TYPES(result.scalar_type(), "rotate_to_nodes_summed", [&] {
      cu::rotate_out(data_in<scalar_t>(D), data_in<scalar_t>(envelope), rows_of<const scalar_t>(y),
                     rows, data_in<int64_t>(ix.tgt_order), data_in<int64_t>(ix.tgt_offsets),
                     D.size(0), result.size(2), data_out<scalar_t>(result), result.size(0),
                     on.stream());
    });
  }

  void rotate_out_grad(const torch::Tensor& D, const torch::Tensor& envelope, const MPieces& y,
                       int rows, const LeanIndex& ix, const torch::Tensor& g, const MPieces& gy,
                       const torch::Tensor& gD, const torch::Tensor& genvelope) const override {
    const OnDevice on(g);
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "rotate_to_nodes_summed_backward", [&] {
      cu::rotate_out_grad(
          data_in<scalar_t>(D), data_in<scalar_t>(envelope), rows_of<const scalar_t>(y), rows,
          data_in<int64_t>(ix.tgt), data_in<scalar_t>(g), g.size(2), rows_of<scalar_t>(gy),
          data_out<scalar_t>(gD), data_out<scalar_t>(genvelope), D.size(0), on.stream());
    });
  }

  void rotate_out_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                          const torch::Tensor& envelope, const torch::Tensor& denvelope,
                          const MPieces& y, const MPieces& dy, int rows, const LeanIndex& ix,
                          const torch::Tensor& result) const override {
    const OnDevice on(result);
    AT_DISPATCH_FLOATING_TYPES(result.scalar_type(), "rotate_to_nodes_summed_tangent", [&] {
      cu::rotate_out_tangent(
          data_in<scalar_t>(D), data_in<scalar_t>(dD), data_in<scalar_t>(envelope),
          data_in<scalar_t>(denvelope), rows_of<const scalar_t>(y), rows_of<const scalar_t>(dy),
          rows, data_in<int64_t>(ix.tgt_order), data_in<int64_t>(ix.tgt_offsets), D.size(0),
          result.size(2), data_out<scalar_t>(result), result.size(0), on.stream());
    });
  }

  void rotate_out_grad_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                               const torch::Tensor& envelope, const torch::Tensor& denvelope,
                               const MPieces& y, const MPieces& dy, int rows, const LeanIndex& ix,
                               const torch::Tensor& g, const MPieces& gy2, const torch::Tensor& gD2,
                               const torch::Tensor& genvelope2) const override {
    const OnDevice on(g);
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "rotate_to_nodes_summed_double_backward", [&] {
      cu::rotate_out_grad_tangent(
          data_in<scalar_t>(D), data_in<scalar_t>(dD), data_in<scalar_t>(envelope),
          data_in<scalar_t>(denvelope), rows_of<const scalar_t>(y), rows_of<const scalar_t>(dy),
          rows, data_in<int64_t>(ix.tgt), data_in<scalar_t>(g), g.size(2), rows_of<scalar_t>(gy2),
          data_out<scalar_t>(gD2), data_out<scalar_t>(genvelope2), D.size(0), on.stream());
    });
  }
};

}  // namespace

const LeanLaunchers& cuda_kernel_launchers() {
  static const CudaLaunchers launchers;
  return launchers;
}

}  // namespace uma::edges
