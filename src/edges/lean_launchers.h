// The lean edge kernels of one device, called on whole tensors: the seam
// between the lean operators' autograd logic (edges/lean_edges.cpp, device-
// free) and the launches.  The CPU's (edges/cpu/launchers.cpp) spreads each
// kernel over at::parallel_for ranges; CUDA's (edges/cuda/launchers.cpp,
// built where the engine is compiled with nvcc) enqueues it on the tensors'
// device's current stream, reading nothing back.  The per-element work is the
// same bodies (edges/kernels/) on both.
//
// Shapes as in lean_edges.h: D [E, 9, 9], envelope [E], x and gx [N, 9, C],
// radial [E, 6 * 2C], M-layout pieces [E, rows, channels] with channels
// contiguous; every other tensor contiguous.  "Accumulated" outputs are added
// to; "written" ones overwritten.  An undefined or empty optional output is
// not computed.
#pragma once

#include <torch/torch.h>

#include "edges/kernels/rows.h"
#include "edges/lean_edges.h"
#include "core/uma_error.h"

namespace uma::edges {

// The graph the operators run over: edges [E] and their segments by source
// and by target (possibly over a longer graph: entries >= E are skipped).
struct LeanIndex {
  torch::Tensor src, tgt;
  torch::Tensor src_order, src_offsets, tgt_order, tgt_offsets;
};

class LeanLaunchers {
 public:
  virtual ~LeanLaunchers() = default;

  // ---- the rotation into the edge frame: out = F(D, x, radial)
  // out: 3 pieces of 2C channels, written.
  virtual void rotate_in(const torch::Tensor& D, const torch::Tensor& x,
                         const torch::Tensor& radial, const LeanIndex& ix,
                         const MPieces& out) const = 0;
  // out (written) = F(dD, x, r) + F(D, dx, r) + F(D, x, dr).
  virtual void rotate_in_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                                 const torch::Tensor& x, const torch::Tensor& dx,
                                 const torch::Tensor& radial, const torch::Tensor& dradial,
                                 const LeanIndex& ix, const MPieces& out) const = 0;
  // F's gradient along g: gD (accumulated; only with gradial), gradial
  // (written), gx (accumulated).
  virtual void rotate_in_grad(const torch::Tensor& D, const torch::Tensor& x,
                              const torch::Tensor& radial, const MPieces& g, const LeanIndex& ix,
                              const torch::Tensor& gD, const torch::Tensor& gradial,
                              const torch::Tensor& gx) const = 0;
  // The tangents of rotate_in_grad along (dD, dx, dradial): its gD
  // (accumulated, optional) and gradial (written) parts, and its gx part
  // (accumulated) without dx (gx does not depend on x).
  virtual void rotate_in_grad_edges_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                                            const torch::Tensor& x, const torch::Tensor& dx,
                                            const torch::Tensor& radial,
                                            const torch::Tensor& dradial, const MPieces& g,
                                            const LeanIndex& ix, const torch::Tensor& gD,
                                            const torch::Tensor& gradial) const = 0;
  virtual void rotate_in_grad_nodes_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                                            const torch::Tensor& radial,
                                            const torch::Tensor& dradial, const MPieces& g,
                                            const LeanIndex& ix, const torch::Tensor& gx) const = 0;

  // ---- the gate: y0 [E, 5H] (rows with stride y0.stride(0)), y1, y2 pieces,
  // sig = sigmoid(y0[:, :3H]) [E, 3H]; every output written.
  virtual void gate(const torch::Tensor& y0, const MPieces& y, const torch::Tensor& sig,
                    const MPieces& q) const = 0;
  // gy0 [E, 5H] contiguous and gy (pieces 1 and 2).
  virtual void gate_grad(const torch::Tensor& y0, const MPieces& y, const torch::Tensor& sig,
                         const MPieces& gq, const torch::Tensor& gy0, const MPieces& gy) const = 0;
  virtual void gate_grad_grad(const torch::Tensor& y0, const MPieces& y, const torch::Tensor& sig,
                              const MPieces& gq, const torch::Tensor& a0, const MPieces& a,
                              const MPieces& dgq, const torch::Tensor& dy0,
                              const MPieces& dy) const = 0;

  // ---- the rotation back, summed into the targets: out = R(D, envelope, y)
  // over `rows` (3 or 9) M rows; out [N, 9, C] accumulated.
  virtual void rotate_out(const torch::Tensor& D, const torch::Tensor& envelope, const MPieces& y,
                          int rows, const LeanIndex& ix, const torch::Tensor& out) const = 0;
  // R's gradient along g [N, 9, C]: gy written; gD (zeroed by the caller
  // outside the l-blocks) and genvelope (written) both or neither.
  virtual void rotate_out_grad(const torch::Tensor& D, const torch::Tensor& envelope,
                               const MPieces& y, int rows, const LeanIndex& ix,
                               const torch::Tensor& g, const MPieces& gy, const torch::Tensor& gD,
                               const torch::Tensor& genvelope) const = 0;
  // The tangents along (dD, denvelope, dy): of R (out accumulated) and of
  // R's gradient (gy2 written; gD2 and genvelope2 both or neither).
  virtual void rotate_out_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                                  const torch::Tensor& envelope, const torch::Tensor& denvelope,
                                  const MPieces& y, const MPieces& dy, int rows,
                                  const LeanIndex& ix, const torch::Tensor& out) const = 0;
  virtual void rotate_out_grad_tangent(const torch::Tensor& D, const torch::Tensor& dD,
                                       const torch::Tensor& envelope,
                                       const torch::Tensor& denvelope, const MPieces& y,
                                       const MPieces& dy, int rows, const LeanIndex& ix,
                                       const torch::Tensor& g, const MPieces& gy2,
                                       const torch::Tensor& gD2,
                                       const torch::Tensor& genvelope2) const = 0;
};

const LeanLaunchers& cpu_lean_launchers();
// The CUDA kernels' launchers (edges/cuda/launchers.cpp), where they are linked.
const LeanLaunchers& cuda_kernel_launchers();
// Those where the engine was built with nvcc (edges/cuda/available.cpp); null
// where it was not (edges/cuda_absent.cpp).
const LeanLaunchers* cuda_lean_launchers();
// The launchers of a device; throws uma::Error where there are none.
const LeanLaunchers& lean_launchers_for(const torch::Device& device);

// ---- for the launchers: raw pointers and row views of tensors

// Null for an undefined or empty tensor (an output not wanted).  The
// launchers hand these to kernels on the tensor's own device.
template <typename T>
T* data_of(const torch::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return nullptr;
  return t.data_ptr<std::remove_const_t<T>>();  // kernel argument
}
template <typename T>
const T* data_in(const torch::Tensor& t) {
  return data_of<const T>(t);
}
template <typename T>
T* data_out(const torch::Tensor& t) {
  return data_of<T>(t);
}

template <typename T>
kernels::Rows<T> rows_of(const MPieces& p) {
  kernels::Rows<T> r;
  for (int i = 0; i < 3; ++i) {
    if (!p[i].defined() || p[i].numel() == 0) continue;
    if (p[i].dim() != 3 || p[i].stride(2) != 1)
      throw Error("internal: an M-layout piece needs contiguous channels");
    r.base[i] = data_of<T>(p[i]);
    r.edge_stride[i] = p[i].stride(0);
    r.row_stride[i] = p[i].stride(1);
  }
  return r;
}

}  // namespace uma::edges
