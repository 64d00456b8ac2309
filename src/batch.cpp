#include "batch.h"

#include <cmath>

namespace uma {
namespace {

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

torch::Tensor host_tensor(const std::vector<int64_t>& v, const torch::Device& device) {
  return torch::tensor(v, torch::kLong).to(device);
}

}  // namespace

double cell_volume(const Matrix3& c) {
  return std::abs(c[0][0] * (c[1][1] * c[2][2] - c[1][2] * c[2][1]) -
                  c[0][1] * (c[1][0] * c[2][2] - c[1][2] * c[2][0]) +
                  c[0][2] * (c[1][0] * c[2][1] - c[1][1] * c[2][0]));
}

BatchInput make_batch_input(const std::vector<Atoms>& systems, const torch::TensorOptions& fopts) {
  const auto device = fopts.device();
  const auto dopts = fopts.dtype(torch::kFloat64);
  const int64_t B = static_cast<int64_t>(systems.size());
  BatchInput out;
  BatchTensors& in = out.in;
  std::vector<torch::Tensor> pos_parts;
  std::vector<int64_t> numbers, batch, natoms, charge, spin;
  std::vector<double> inverse_cells, periodic;
  in.atom_offsets.push_back(0);
  for (int64_t b = 0; b < B; ++b) {
    const Atoms& a = systems[b];
    const int64_t n = static_cast<int64_t>(a.numbers.size());
    pos_parts.push_back(a.positions.to(fopts));
    numbers.insert(numbers.end(), a.numbers.begin(), a.numbers.end());
    batch.insert(batch.end(), n, b);
    natoms.push_back(n);
    charge.push_back(a.charge);
    spin.push_back(a.spin);
    in.datasets.push_back(a.task);
    in.atom_offsets.push_back(in.atom_offsets.back() + n);
    for (const auto& row : a.cell) out.cells.insert(out.cells.end(), row.begin(), row.end());
    out.volumes.push_back(cell_volume(a.cell));
    out.graph.push_back({in.atom_offsets[b], n, graph_cell(a.cell, a.pbc), a.pbc});
    const Matrix3 inv = inverse(out.graph.back().cell);
    for (const auto& row : inv) inverse_cells.insert(inverse_cells.end(), row.begin(), row.end());
    for (int k = 0; k < 3; ++k) periodic.push_back(a.pbc[k] ? 1.0 : 0.0);
  }
  in.numbers = host_tensor(numbers, device);
  in.batch = host_tensor(batch, device);
  in.natoms = host_tensor(natoms, device);
  in.charge = host_tensor(charge, device);
  in.spin = host_tensor(spin, device);

  // Wrap into the cell along periodic directions.
  torch::NoGradGuard no_grad;
  auto pos = torch::cat(pos_parts, 0);
  auto cell = torch::tensor(out.cells, torch::kFloat64).to(dopts).view({B, 3, 3}).index_select(0, in.batch);
  auto inv = torch::tensor(inverse_cells, torch::kFloat64).to(dopts).view({B, 3, 3}).index_select(0, in.batch);
  auto frac = torch::bmm(pos.to(torch::kFloat64).unsqueeze(1), inv).squeeze(1);
  auto mask = torch::tensor(periodic, torch::kFloat64).to(dopts).view({B, 3}).index_select(0, in.batch);
  auto image = (torch::floor(frac) * mask).to(fopts.dtype());
  out.positions = pos - torch::bmm(image.unsqueeze(1), cell.to(fopts.dtype())).squeeze(1);
  return out;
}

torch::Tensor cell_tensor(const BatchInput& batch, const torch::TensorOptions& options) {
  const int64_t B = static_cast<int64_t>(batch.graph.size());
  return torch::tensor(batch.cells, torch::kFloat64).to(options).view({B, 3, 3});
}

torch::Tensor edge_vectors(const torch::Tensor& pos, const RadiusGraph& graph, const torch::Tensor& cells) {
  torch::NoGradGuard no_grad;
  auto shift = torch::bmm(graph.offsets.to(cells.scalar_type()).unsqueeze(1),
                          cells.index_select(0, graph.edge_system)).squeeze(1);
  return pos.index_select(0, graph.src) - pos.index_select(0, graph.tgt) + shift;
}

}  // namespace uma
