// A step's geometry gathered from the host into the model's device tensors:
// positions and cells packed into one staging buffer, one counted upload.
// (The per-layout integers are the step plan's: step_plan.h.)
#pragma once

#include <array>
#include <vector>

#include <torch/torch.h>

#include "graph/radius_graph.h"
#include "runtime/transfers.h"

namespace uma {

struct Atoms;

// One system's geometry as the host holds it.
struct SystemGeometry {
  torch::Tensor positions;  // [n, 3] Angstrom, any dtype; CPU or the model's device
  Matrix3 cell{};           // rows are lattice vectors
  std::array<bool, 3> pbc{false, false, false};
  int64_t ntargets = -1;  // see GraphSystem
  // Positions on the model's device used where they are (DeviceAtoms), also
  // when that device is the CPU; otherwise CPU positions are staged.
  bool in_place = false;
  std::array<double, 3> origin{0.0, 0.0, 0.0};  // subtracted from positions on the device
};

struct Geometry {
  torch::Tensor positions;         // [N, 3] model dtype, wrapped along periodic directions
  torch::Tensor cells;             // [B, 3, 3] float64 graph cells (see graph_cell)
  torch::Tensor inv_volume;        // [B] float64, 1 / |det cell| (NaN without volume)
  torch::Tensor nonfinite;         // [] long: non-finite values among positions on the device
  std::vector<GraphSystem> graph;  // [B] host: one block of the radius graph per system
};

// Per-step geometry, one upload (positions already on the device travel no
// further).  Throws uma::Error if host positions hold NaN or inf.
Geometry upload_geometry(const std::vector<SystemGeometry>& systems,
                         const torch::TensorOptions& float_options, StagingBuffer& staging);
std::vector<SystemGeometry> geometry_of(const std::vector<Atoms>& systems);

// Edge vectors r_src - r_tgt + n . cell for the graph's edges, without grad.
torch::Tensor edge_vectors(const torch::Tensor& positions, const RadiusGraph& graph,
                           const torch::Tensor& cells);

double cell_volume(const Matrix3& cell);
Matrix3 inverse(const Matrix3& m);

}  // namespace uma
