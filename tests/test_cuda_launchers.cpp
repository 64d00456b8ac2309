// The CUDA launchers' plumbing (edges/cuda/launchers.cpp: which tensor, size
// and stride goes to which kernel argument), on the CPU: compiled against the
// CUDA entry points emulated on the host (cuda_emulation/kernels_on_host.cpp),
// every launcher method gives what the CPU's launchers give on the same
// tensors, in float64 and float32, on a graph whose segments cover more edges
// than the operators are given, with a node without edges, a gate input whose
// rows are longer than its 5H columns, and outputs that accumulate starting
// from the same random contents.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "edges/edge_segments.h"
#include "edges/lean_launchers.h"

namespace uma::edges {
namespace {

constexpr int64_t kNodes = 9, kGraphEdges = 41, kEdges = 37, C = 6, H = 5;

struct Inputs {
  LeanIndex ix;
  torch::Tensor D, dD, x, dx, radial, dradial, envelope, denvelope, gout;
  MPieces g, y, dy;                 // rotate-in's incoming gradient; rotate-out's input and tangent
  torch::Tensor wide, y0, sig, a0;  // the gate: y0 a view of wide's columns [H, 6H)
  MPieces gy, gq, a;                // the gate's y (pieces 1, 2), its incoming gradient, adjoints
};

torch::Tensor rand(std::vector<int64_t> shape, torch::ScalarType dtype) {
  return torch::randn(shape, torch::kFloat64).to(dtype);
}

MPieces pieces(int64_t channels, torch::ScalarType dtype) {
  return {rand({kEdges, 3, channels}, dtype), rand({kEdges, 4, channels}, dtype),
          rand({kEdges, 2, channels}, dtype)};
}

Inputs inputs(torch::ScalarType dtype) {
  torch::manual_seed(5);
  Inputs in;
  auto src = torch::randint(0, kNodes - 1, {kGraphEdges}, torch::kLong);
  auto tgt = torch::randint(0, kNodes - 1, {kGraphEdges}, torch::kLong);
  const auto by_src = segments_by_node(src, kNodes), by_tgt = segments_by_node(tgt, kNodes);
  in.ix = {src.narrow(0, 0, kEdges).contiguous(),
           tgt.narrow(0, 0, kEdges).contiguous(),
           by_src.order,
           by_src.offsets,
           by_tgt.order,
           by_tgt.offsets};
  in.D = rand({kEdges, 9, 9}, dtype), in.dD = rand({kEdges, 9, 9}, dtype);
  in.x = rand({kNodes, 9, C}, dtype), in.dx = rand({kNodes, 9, C}, dtype);
  in.radial = rand({kEdges, 12 * C}, dtype), in.dradial = rand({kEdges, 12 * C}, dtype);
  in.envelope = rand({kEdges}, dtype), in.denvelope = rand({kEdges}, dtype);
  in.gout = rand({kNodes, 9, C}, dtype);
  in.g = pieces(2 * C, dtype), in.y = pieces(C, dtype), in.dy = pieces(C, dtype);
  in.wide = rand({kEdges, 7 * H}, dtype);
  in.y0 = in.wide.narrow(1, H, 5 * H);
  in.sig = torch::sigmoid(in.y0.narrow(1, 0, 3 * H)).contiguous();
  in.a0 = rand({kEdges, 5 * H}, dtype);
  const MPieces gate_rows = pieces(H, dtype);
  in.gy = {torch::Tensor(), gate_rows[1], gate_rows[2]};
  in.gq = pieces(H, dtype);
  const MPieces adjoints = pieces(H, dtype);
  in.a = {torch::Tensor(), adjoints[1], adjoints[2]};
  return in;
}

// Fresh outputs: accumulated ones start from the same random contents.
torch::Tensor start(std::vector<int64_t> shape, const torch::Tensor& like) {
  torch::manual_seed(77);
  return rand(shape, like.scalar_type());
}
MPieces start_pieces(int64_t channels, const torch::Tensor& like) {
  torch::manual_seed(78);
  return pieces(channels, like.scalar_type());
}

using Outputs = std::vector<torch::Tensor>;
using Method = std::function<Outputs(const LeanLaunchers&, const Inputs&)>;

const std::vector<std::pair<std::string, Method>>& methods() {
  static const std::vector<std::pair<std::string, Method>> all = {
      {"rotate_in",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto out = start_pieces(2 * C, in.x);
         l.rotate_in(in.D, in.x, in.radial, in.ix, out);
         return Outputs{out[0], out[1], out[2]};
       }},
      {"rotate_in_tangent",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto out = start_pieces(2 * C, in.x);
         l.rotate_in_tangent(in.D, in.dD, in.x, in.dx, in.radial, in.dradial, in.ix, out);
         return Outputs{out[0], out[1], out[2]};
       }},
      {"rotate_in_grad",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto gD = start({kEdges, 9, 9}, in.x), gr = start({kEdges, 12 * C}, in.x),
              gx = start({kNodes, 9, C}, in.x);
         l.rotate_in_grad(in.D, in.x, in.radial, in.g, in.ix, gD, gr, gx);
         return Outputs{gD, gr, gx};
       }},
      {"rotate_in_grad without D",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto gr = start({kEdges, 12 * C}, in.x), gx = start({kNodes, 9, C}, in.x);
         l.rotate_in_grad(in.D, in.x, in.radial, in.g, in.ix, torch::Tensor(), gr, gx);
         return Outputs{gr, gx};
       }},
      {"rotate_in_grad_edges_tangent",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto gD = start({kEdges, 9, 9}, in.x), gr = start({kEdges, 12 * C}, in.x);
         l.rotate_in_grad_edges_tangent(in.D, in.dD, in.x, in.dx, in.radial, in.dradial, in.g,
                                        in.ix, gD, gr);
         return Outputs{gD, gr};
       }},
      {"rotate_in_grad_nodes_tangent",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto gx = start({kNodes, 9, C}, in.x);
         l.rotate_in_grad_nodes_tangent(in.D, in.dD, in.radial, in.dradial, in.g, in.ix, gx);
         return Outputs{gx};
       }},
      {"gate",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto q = start_pieces(H, in.x);
         l.gate(in.y0, in.gy, in.sig, q);
         return Outputs{q[0], q[1], q[2]};
       }},
      {"gate_grad",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto gy0 = start({kEdges, 5 * H}, in.x);
         auto gy = start_pieces(H, in.x);
         gy[0] = torch::Tensor();
         l.gate_grad(in.y0, in.gy, in.sig, in.gq, gy0, gy);
         return Outputs{gy0, gy[1], gy[2]};
       }},
      {"gate_grad_grad",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto dgq = start_pieces(H, in.x);
         auto dy0 = start({kEdges, 5 * H}, in.x);
         auto dy = start_pieces(H, in.x);
         dy[0] = torch::Tensor();
         l.gate_grad_grad(in.y0, in.gy, in.sig, in.gq, in.a0, in.a, dgq, dy0, dy);
         return Outputs{dgq[0], dgq[1], dgq[2], dy0, dy[1], dy[2]};
       }},
      {"rotate_out 9 rows",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto out = start({kNodes, 9, C}, in.x);
         l.rotate_out(in.D, in.envelope, in.y, 9, in.ix, out);
         return Outputs{out};
       }},
      {"rotate_out 3 rows",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto out = start({kNodes, 9, C}, in.x);
         l.rotate_out(in.D, in.envelope, {in.y[0], {}, {}}, 3, in.ix, out);
         return Outputs{out};
       }},
      {"rotate_out_grad",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto gy = start_pieces(C, in.x);
         auto gD = start({kEdges, 9, 9}, in.x), genv = start({kEdges}, in.x);
         l.rotate_out_grad(in.D, in.envelope, in.y, 9, in.ix, in.gout, gy, gD, genv);
         return Outputs{gy[0], gy[1], gy[2], gD, genv};
       }},
      {"rotate_out_grad without the geometry",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto gy = start_pieces(C, in.x);
         l.rotate_out_grad(in.D, in.envelope, in.y, 9, in.ix, in.gout, gy, {}, {});
         return Outputs{gy[0], gy[1], gy[2]};
       }},
      {"rotate_out_tangent",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto out = start({kNodes, 9, C}, in.x);
         l.rotate_out_tangent(in.D, in.dD, in.envelope, in.denvelope, in.y, in.dy, 9, in.ix, out);
         return Outputs{out};
       }},
      {"rotate_out_grad_tangent",
       [](const LeanLaunchers& l, const Inputs& in) {
         auto gy = start_pieces(C, in.x);
         auto gD = start({kEdges, 9, 9}, in.x), genv = start({kEdges}, in.x);
         l.rotate_out_grad_tangent(in.D, in.dD, in.envelope, in.denvelope, in.y, in.dy, 9, in.ix,
                                   in.gout, gy, gD, genv);
         return Outputs{gy[0], gy[1], gy[2], gD, genv};
       }},
  };
  return all;
}

TEST(CudaLaunchers, GiveTheCpuLaunchersResultsOnTheHost) {
  for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
    const Inputs in = inputs(dtype);
    const double tol = dtype == torch::kFloat64 ? 1e-13 : 1e-5;
    for (const auto& [name, method] : methods()) {
      SCOPED_TRACE(name + (dtype == torch::kFloat64 ? " float64" : " float32"));
      const Outputs cuda = method(cuda_kernel_launchers(), in);
      const Outputs cpu = method(cpu_lean_launchers(), in);
      ASSERT_EQ(cuda.size(), cpu.size());
      for (size_t i = 0; i < cpu.size(); ++i) {
        const double scale = cpu[i].abs().max().item<double>();
        ASSERT_GT(scale, 0.0) << "output " << i;
        EXPECT_LE((cuda[i] - cpu[i]).abs().max().item<double>(), tol * scale) << "output " << i;
      }
    }
  }
}

}  // namespace
}  // namespace uma::edges
