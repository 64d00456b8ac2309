#include "edges/edge_backend.h"

#include "edges/edge_rotation.h"
#include "edges/edgewise.h"
#include "edges/edge_matmul.h"
#include "edges/edge_segments.h"
#include "edges/lean_edges.h"
#include "edges/launch/launch.h"
#include "core/choices.h"
#include "core/uma_error.h"

namespace uma::edges {
namespace {

// The node whose segment an edge joins: none (`nodes`, past the last
// segment) for a padding slot.  A padding slot's terms in the sums into
// nodes are exact zeros (its envelope is zero, its vector a constant).
torch::Tensor segment_node(const EdgeFrame& frame, const torch::Tensor& node, int64_t nodes) {
  return frame.valid.defined() ? leave_out(node, frame.valid, nodes) : node;
}

// The composition of LibTorch operators; its sums into nodes are NodeSums
// (segment sums on a GPU, made at each call: frame.first(n) keeps no
// segments for it).
class ReferenceEdges final : public EdgeBackend {
 public:
  const char* name() const override { return "reference"; }
  bool second_derivatives() const override { return true; }
  bool skips_padding() const override { return false; }

  void prepare(EdgeFrame& frame, const torch::Tensor& D, const torch::Tensor& envelope,
               int64_t) const override {
    frame.wigner = to_m_layout(D, 1);  // [E, 9(M), 9(L)]
    frame.wigner_inv_envelope = to_m_layout(D.transpose(1, 2), 2) * envelope.view({-1, 1, 1});
  }
  std::vector<torch::Tensor*> rotations(EdgeFrame& frame) const override {
    return {&frame.wigner, &frame.wigner_inv_envelope};
  }
  torch::Tensor degree(const EdgeFrame& frame, const torch::Tensor& radial,
                       int64_t nodes) const override {
    auto messages = edge_matmul(frame.wigner_inv_envelope.narrow(2, 0, 3), radial);  // [E, 9, C]
    return NodeSums(segment_node(frame, frame.tgt, nodes), nodes)(messages);
  }
  torch::Tensor messages_summed(EdgewiseImpl& edgewise, const torch::Tensor& x,
                                const EdgeFrame& frame, const MoleContext& ctx) const override {
    const int64_t N = x.size(0);
    return NodeSums(segment_node(frame, frame.tgt, N), N)(edgewise.messages(x, frame, ctx));
  }
  double frame_bytes(const EdgeWidths& w, double s) const override {
    // two Wigner matrices, D and its intermediates, the basis and the
    // distances' offsets from its centres; the edges' two elements (int64)
    return s * (6 * 81 + 2 * w.basis) + 2 * 8;
  }
  double block_bytes(const EdgeWidths& w, double s, bool /*trained*/) const override {
    // the gathered message (9 x 2C), its radial weights (6 x 2C), the radial
    // MLP's two fused layer norms' and activations' inputs (2Ec), the first
    // convolution's outputs and the gate's terms (22H) and the second
    // convolution's output (9C)
    return s * (39 * w.sphere + 22 * w.hidden + 2 * w.edge);
  }
};

// The fused operators (lean_edges.h), on the CPU or on CUDA: the same
// autograd functions; the launchers are the tensors' device's.  On CUDA the
// count of edges found stays on the device, so the blocks run over the
// graph's padding slots too (their envelope is zero).
class LeanEdges final : public EdgeBackend {
 public:
  explicit LeanEdges(bool on_cpu) : on_cpu_(on_cpu) {}
  const char* name() const override { return "lean"; }
  bool second_derivatives() const override { return true; }
  bool skips_padding() const override { return on_cpu_; }

  void prepare(EdgeFrame& frame, const torch::Tensor& D, const torch::Tensor& envelope,
               int64_t nodes) const override {
    frame.D = D;
    frame.envelope = envelope;
    frame.by_source = segments_by_node(segment_node(frame, frame.src, nodes), nodes);
    frame.by_target = segments_by_node(segment_node(frame, frame.tgt, nodes), nodes);
  }
  std::vector<torch::Tensor*> rotations(EdgeFrame& frame) const override {
    return {&frame.D, &frame.envelope};
  }
  torch::Tensor degree(const EdgeFrame& frame, const torch::Tensor& radial,
                       int64_t nodes) const override {
    return rotate_to_nodes_summed(frame.D, frame.envelope, {radial, {}, {}}, frame.tgt,
                                  frame.by_target, nodes);
  }
  torch::Tensor messages_summed(EdgewiseImpl& edgewise, const torch::Tensor& x,
                                const EdgeFrame& frame, const MoleContext& ctx) const override {
    const int64_t E = frame.src.size(0);
    auto& conv1 = edgewise.first_conv();
    auto& conv2 = edgewise.second_conv();
    auto msg = rotate_to_edge_frame(frame.D, x, frame.src, frame.tgt,
                                    conv1->radial_weights(frame.radial_input), frame.by_source,
                                    frame.by_target);
    auto y = conv1->convolve(msg[0].view({E, -1}), msg[1].view({E, 2, -1}), msg[2], ctx);
    auto h = gate_m_pieces(y[0], y[1], y[2], gate_sigmoids());
    auto z = conv2->convolve(h[0].view({E, -1}), h[1].view({E, 2, -1}), h[2], ctx);
    return rotate_to_nodes_summed(frame.D, frame.envelope, {z[0].view({E, 3, -1}), z[1], z[2]},
                                  frame.tgt, frame.by_target, x.size(0));
  }
  double frame_bytes(const EdgeWidths& w, double s) const override {
    // D and its intermediates, the basis and the distances' offsets from its
    // centres; the edges' two elements and the segments by source and by
    // target (2 x int64 each)
    return s * (4 * 81 + 2 * w.basis) + 6 * 8;
  }
  double block_bytes(const EdgeWidths& w, double s, bool trained) const override {
    // the radial MLP's two fused layer norms' and activations' inputs (2Ec)
    // and its weights (6 x 2C), the first convolution's outputs (11H), the gate's
    // sigmoids (3H) where kept, or recomputed and kept by a training step's
    // first backward, and the second convolution's output (9C)
    const double sigmoids = gate_sigmoids() == GateSigmoids::kKept || trained ? 3 : 0;
    return s * (21 * w.sphere + (11 + sigmoids) * w.hidden + 2 * w.edge);
  }

 private:
  // Kept on the CPU (recomputing them cost about 1% of an evaluation there),
  // recomputed on a GPU (a fast elementwise pass, and GPU memory is scarcer).
  GateSigmoids gate_sigmoids() const {
    return on_cpu_ ? GateSigmoids::kKept : GateSigmoids::kRecomputed;
  }
  bool on_cpu_;
};

}  // namespace

const EdgeBackend& reference_edges() {
  static const ReferenceEdges backend;
  return backend;
}

const EdgeBackend& lean_cpu_edges() {
  static const LeanEdges backend(/*on_cpu=*/true);
  return backend;
}

const EdgeBackend& lean_cuda_edges() {
  static const LeanEdges backend(/*on_cpu=*/false);
  return backend;
}

EdgeOps parse_edge_ops(const std::string& name) {
  if (name == kEdgeOpsNames[0]) return EdgeOps::kLean;
  if (name == kEdgeOpsNames[1]) return EdgeOps::kReference;
  throw Error("the edge operators are " + one_of(edge_ops_names()) + ", got '" + name + "'");
}

std::vector<std::string> edge_ops_names() {
  return {std::begin(kEdgeOpsNames), std::end(kEdgeOpsNames)};
}

const char* edge_ops_name(EdgeOps ops) { return kEdgeOpsNames[ops == EdgeOps::kLean ? 0 : 1]; }

const EdgeBackend& edge_backend_for(EdgeOps ops, const torch::Device& device) {
  if (ops == EdgeOps::kReference) return reference_edges();
  if (device.is_cpu()) return lean_cpu_edges();
  if (device.is_cuda() && launch::cuda_launches_built()) return lean_cuda_edges();
  return reference_edges();
}

}  // namespace uma::edges
