#include "graph/batch.h"

#include <cmath>

#include "core/atoms.h"
#include "graph/geometry_matmul.h"
#include "core/uma_error.h"

namespace uma {

double cell_volume(const Matrix3& c) {
  return std::abs(c[0][0] * (c[1][1] * c[2][2] - c[1][2] * c[2][1]) -
                  c[0][1] * (c[1][0] * c[2][2] - c[1][2] * c[2][0]) +
                  c[0][2] * (c[1][0] * c[2][1] - c[1][1] * c[2][0]));
}

Matrix3 inverse(const Matrix3& m) {
  const double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                     m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                     m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  Matrix3 r{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      const int i1 = (j + 1) % 3, i2 = (j + 2) % 3, j1 = (i + 1) % 3, j2 = (i + 2) % 3;
      r[i][j] = (m[i1][j1] * m[i2][j2] - m[i1][j2] * m[i2][j1]) / det;
    }
  return r;
}

std::vector<SystemGeometry> geometry_of(const std::vector<Atoms>& systems) {
  std::vector<SystemGeometry> out;
  for (const auto& a : systems) {
    if (!a.piece.defined()) {
      out.push_back({a.positions, a.cell, a.pbc, -1, a.on_device.defined(), a.on_device.origin});
      continue;
    }
    // A piece: no periodicity; only its targets receive messages.  A piece
    // without atoms runs on one placeholder atom (step_plan.h).
    const Piece& p = a.piece;
    if (atom_count(a) == 0) {
      out.push_back(
          {torch::zeros({1, 3}, torch::kFloat64), Matrix3{}, {false, false, false}, 1, false, {}});
      continue;
    }
    const int64_t targets = p.exchange_ghosts ? p.n_owned : p.n_targets;
    out.push_back({a.positions,
                   Matrix3{},
                   {false, false, false},
                   targets,
                   a.on_device.defined(),
                   a.on_device.origin});
  }
  return out;
}

Geometry upload_geometry(const std::vector<SystemGeometry>& systems,
                         const torch::TensorOptions& fopts, StagingBuffer& staging) {
  const auto device = fopts.device();
  const int64_t B = static_cast<int64_t>(systems.size());
  Geometry out;
  // Host-side positions go into the staging buffer after the per-system
  // numbers: [graph cells 9B | inverse graph cells 9B | periodic 3B |
  // 1/volume B | origin 3B | positions of the host-side systems].
  const int64_t header = 25 * B;
  auto staged = [](const SystemGeometry& s) {
    return s.positions.device().is_cpu() && !s.in_place;
  };
  int64_t host_values = 0, N = 0;
  bool shifted = false;
  for (const auto& s : systems) {
    if (staged(s)) host_values += 3 * s.positions.size(0);
    shifted |= s.origin != std::array<double, 3>{0.0, 0.0, 0.0};
    out.graph.push_back({N, s.positions.size(0), graph_cell(s.cell, s.pbc), s.pbc, s.ntargets});
    N += s.positions.size(0);
  }
  double* buf = staging.host(header + host_values, device);
  for (int64_t b = 0; b < B; ++b) {
    const auto& s = systems[b];
    const Matrix3& g = out.graph[b].cell;
    const Matrix3 inv = inverse(g);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        buf[9 * b + 3 * i + j] = g[i][j];
        buf[9 * B + 9 * b + 3 * i + j] = inv[i][j];
      }
    for (int k = 0; k < 3; ++k) buf[18 * B + 3 * b + k] = s.pbc[k] ? 1.0 : 0.0;
    const double v = cell_volume(s.cell);
    buf[21 * B + b] = v > 1e-6 ? 1.0 / v : std::nan("");
    for (int k = 0; k < 3; ++k) buf[22 * B + 3 * b + k] = s.origin[k];
  }
  int64_t at = header;
  for (int64_t b = 0; b < B; ++b) {
    const auto& s = systems[b];
    if (!staged(s)) continue;
    if (staging.put(at, s.positions) > 0)
      throw Error((B > 1 ? "system " + std::to_string(b) + ": " : std::string()) +
                  "positions contain NaN or infinite values");
    at += 3 * s.positions.size(0);
  }
  auto packed = staging.send(fopts.dtype(torch::kFloat64));
  out.cells = packed.narrow(0, 0, 9 * B).view({B, 3, 3});
  auto inv = packed.narrow(0, 9 * B, 9 * B).view({B, 3, 3});
  auto periodic = packed.narrow(0, 18 * B, 3 * B).view({B, 3});
  out.inv_volume = packed.narrow(0, 21 * B, B);
  auto origins = packed.narrow(0, 22 * B, 3 * B).view({B, 3});

  std::vector<torch::Tensor> parts;
  at = header;
  for (const auto& s : systems) {
    const int64_t n = s.positions.size(0);
    if (staged(s)) {
      parts.push_back(packed.narrow(0, at, 3 * n).view({n, 3}));
      at += 3 * n;
    } else {
      if (s.positions.device() != device)
        throw Error("positions live on " + s.positions.device().str() + ", the model on " +
                    device.str());
      parts.push_back(s.positions.detach().to(torch::kFloat64));
    }
  }
  torch::NoGradGuard no_grad;
  auto pos = parts.size() == 1 ? parts[0] : torch::cat(parts, 0);  // [N, 3] float64
  out.nonfinite = (~torch::isfinite(pos)).sum();
  // Wrap into the cell along periodic directions, in the model's dtype (the
  // image is found from the positions as the model sees them); the system of
  // each atom comes from the host-known block sizes, without a lookup table.
  const auto dtype = fopts.dtype().toScalarType();
  std::vector<torch::Tensor> wrapped;
  for (int64_t b = 0; b < B; ++b) {
    auto p = pos.narrow(0, out.graph[b].first_atom, out.graph[b].natoms);
    p = (shifted ? p - origins[b] : p).to(dtype);
    auto image = (torch::floor(p.to(torch::kFloat64).matmul(inv[b])) * periodic[b]).to(dtype);
    wrapped.push_back(p - geometry_matmul(image, out.cells[b].to(dtype)));
  }
  out.positions = B == 1 ? wrapped[0] : torch::cat(wrapped, 0);
  return out;
}

torch::Tensor edge_vectors(const torch::Tensor& pos, const RadiusGraph& graph,
                           const torch::Tensor& cells) {
  torch::NoGradGuard no_grad;
  // in the positions' dtype, as the model sees them
  auto cell = cells.to(pos.scalar_type());
  auto shift = geometry_matmul(graph.offsets.to(cell.scalar_type()).unsqueeze(1),
                               cell.index_select(0, graph.edge_system))
                   .squeeze(1);
  return pos.index_select(0, graph.src) - pos.index_select(0, graph.tgt) + shift;
}

}  // namespace uma
