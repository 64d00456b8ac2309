#include "edges/edgewise.h"

#include "edges/edge_matmul.h"
#include "edges/gate_activation.h"

namespace uma::edges {

EdgewiseImpl::EdgewiseImpl(int64_t sphere_channels, int64_t hidden_channels,
                           const std::vector<int64_t>& radial_channels, int64_t num_experts) {
  so2_conv_1 =
      register_module("so2_conv_1", SO2Conv(2 * sphere_channels, hidden_channels,
                                            2 * hidden_channels, radial_channels, num_experts));
  so2_conv_2 = register_module("so2_conv_2", SO2Conv(hidden_channels, sphere_channels, 0,
                                                     std::vector<int64_t>{}, num_experts));
}

EdgeFrame EdgeFrame::first(int64_t n) const {
  EdgeFrame part = *this;
  for (auto* t : {&part.src, &part.tgt, &part.valid, &part.wigner, &part.wigner_inv_envelope,
                  &part.D, &part.envelope})
    if (t->defined()) *t = t->narrow(0, 0, n);
  part.radial_input = radial_input.first(n);
  return part;
}

torch::Tensor EdgewiseImpl::forward(const torch::Tensor& x, const EdgeFrame& edges,
                                    const MoleContext& ctx) {
  return edges.backend->messages_summed(*this, x, edges, ctx);
}

torch::Tensor EdgewiseImpl::messages(const torch::Tensor& x, const EdgeFrame& edges,
                                     const MoleContext& ctx) {
  // node -> edge frame: [E, 9, 2C], source channels first
  auto message = edge_gather_matmul(edges.wigner, x, edges.src, edges.tgt, edges.valid);
  auto [hidden, gates] = so2_conv_1->forward(message, &edges.radial_input, ctx);
  hidden = gate_activation(gates, hidden, Layout::kM);
  auto [out, unused] = so2_conv_2->forward(hidden, nullptr, ctx);
  // edge frame -> node, enveloped
  return edge_matmul(edges.wigner_inv_envelope, out);
}

std::vector<MoleLinear> EdgewiseImpl::mole_layers() const {
  auto a = so2_conv_1->mole_layers();
  auto b = so2_conv_2->mole_layers();
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace uma::edges
