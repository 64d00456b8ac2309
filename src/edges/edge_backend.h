// How the blocks' edge work is computed, chosen once per engine (or trainer):
//
//  reference  the LibTorch composition (edge_matmul.h): any device, derivatives
//             of every order (training's forces and stress by create_graph).
//  lean       the fused operators of lean_edges.h: each edge-sized tensor
//             written once; derivatives of first and second order.  On the
//             CPU, and on CUDA where the engine was built with nvcc (the
//             launch template of launch/launch.h).
//
// The backbone, the blocks and the memory model call only this interface: a
// new backend is a new subclass and a new choice in edge_backend_for.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "edges/mole.h"

namespace uma::edges {

struct EdgeFrame;
class EdgewiseImpl;

// Widths of a backbone, for the per-edge byte counts of the memory model.
struct EdgeWidths {
  double sphere = 0, hidden = 0, edge = 0, basis = 0;  // C, H, edge channels, K
};

class EdgeBackend {
 public:
  virtual ~EdgeBackend() = default;
  // "reference" or "lean" (the words of `uma bench --edge-ops`).
  virtual const char* name() const = 0;
  // Whether the backward of its operators can itself be differentiated.
  virtual bool second_derivatives() const = 0;
  // Whether the blocks may skip a graph's padding slots (run over the edges
  // found, a count the host holds): true where the operators run on the CPU.
  virtual bool skips_padding() const = 0;

  // Fills frame's rotation tensors from the edges' Wigner matrices D
  // [E, 9, 9] (L-layout) and envelopes [E]; `nodes`: atoms of the graph.
  virtual void prepare(EdgeFrame& frame, const torch::Tensor& D, const torch::Tensor& envelope,
                       int64_t nodes) const = 0;
  // The frame's tensors that every block reads (and a caller may re-seat as
  // shared leaves, BatchTensors::share).
  virtual std::vector<torch::Tensor*> rotations(EdgeFrame& frame) const = 0;
  // radial: [E, 3, C], the m = 0 rows in the edge frame.  Returns [nodes, 9, C]:
  // rotated to the node frame, enveloped, summed into the targets.
  virtual torch::Tensor degree(const EdgeFrame& frame, const torch::Tensor& radial,
                               int64_t nodes) const = 0;
  // x: [N, 9, C] -> [N, 9, C]: the block's edgewise convolution of x, its
  // messages summed into their targets.
  virtual torch::Tensor messages_summed(EdgewiseImpl& edgewise, const torch::Tensor& x,
                                        const EdgeFrame& frame, const MoleContext& ctx) const = 0;
  // Bytes per edge (s: bytes of the float type) kept by the frame and by one
  // block's stored edge work; `trained`: a training step's, whose first
  // backward is kept for its second (memory_plan.h adds what trained weights
  // keep of their layers' inputs).
  virtual double frame_bytes(const EdgeWidths& w, double s) const = 0;
  virtual double block_bytes(const EdgeWidths& w, double s, bool trained) const = 0;
};

const EdgeBackend& reference_edges();
const EdgeBackend& lean_cpu_edges();
const EdgeBackend& lean_cuda_edges();

// What a user picks (`edge_ops lean|reference`): kLean runs the fused
// operators on the CPU, and on CUDA where the engine has its CUDA launchers
// (built with nvcc; the composition there otherwise); kReference runs the
// composition everywhere.
enum class EdgeOps { kLean, kReference };
const EdgeBackend& edge_backend_for(EdgeOps ops, const torch::Device& device);
// The names users give them, in the one place they are mapped.
constexpr const char* kEdgeOpsNames[] = {"lean", "reference"};
std::vector<std::string> edge_ops_names();
// Throws uma::Error naming the accepted names for any other.
EdgeOps parse_edge_ops(const std::string& name);
const char* edge_ops_name(EdgeOps ops);

}  // namespace uma::edges
