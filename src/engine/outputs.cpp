#include "engine/outputs.h"

#include "edges/edge_segments.h"

namespace uma {

torch::Tensor system_sum(const torch::Tensor& x, const std::vector<int64_t>& offsets,
                         const torch::Tensor& lengths, bool twice) {
  const int64_t B = static_cast<int64_t>(offsets.size()) - 1;
  if (B == 1) return x.narrow(0, 0, offsets[1]).sum(0, /*keepdim=*/true);
  // One sum per block with `twice` (segment_reduce's backward is not
  // differentiable again) and off the CPU (where segment_reduce adds a
  // block's rows one after another in one thread per column).
  if (twice || edges::sums_in_segments(x.device())) {
    std::vector<torch::Tensor> sums;
    for (int64_t b = 0; b < B; ++b)
      sums.push_back(x.narrow(0, offsets[b], offsets[b + 1] - offsets[b]).sum(0, true));
    return torch::cat(sums);
  }
  return torch::segment_reduce(x, "sum", lengths, /*indices=*/{}, /*offsets=*/{}, /*axis=*/0,
                               /*unsafe=*/true, /*initial=*/0);
}

Evaluation assemble_outputs(const StepPlan& plan, const StepState& step, const Geometry& geo,
                            const Request& what, StagedBackward& stages) {
  const BatchTensors& in = plan.in;
  const RadiusGraph& graph = step.graph;
  const int64_t B = step.systems, N = step.nodes;
  const bool twice = what.create_graph;
  Evaluation ev;
  ev.request = what;
  const auto& escale = plan.energy_scale;
  const bool raw = plan.identity;  // training: the raw outputs, no scale or shift to apply
  ev.energy = raw ? step.raw_energy : step.raw_energy * escale + plan.energy_shift;
  ev.atom_energy = raw ? step.raw_atom
                       : step.raw_atom * (B == 1 ? escale : escale.index_select(0, in.batch)) +
                             plan.atom_shift;
  if (step.features.defined()) ev.features = step.features.detach();
  ev.natoms = in.natoms;
  ev.batch = in.batch;
  ev.edge_counts = graph.counts;
  ev.close_atoms = graph.close_atoms;
  ev.nonfinite = geo.nonfinite;
  ev.graph_sizes = graph.sizes;
  for (const auto& c : graph.capacity) ev.capacities.push_back(c.edges);
  if (!what.gradients) return ev;

  // [E, 3] dE/dr_edge; stage by stage where the model called collectives,
  // which then run here, on this thread (staged_backward.h).  A training
  // step keeps its graph for the second-order backward (whole systems: no
  // collectives).
  const torch::Tensor& vec = step.vec;
  auto g = twice ? torch::autograd::grad({step.raw_energy.sum()}, {vec}, {}, /*retain_graph=*/true,
                                         /*create_graph=*/true)[0]
                 : stages.grad(step.raw_energy.sum(), {vec})[0];
  const auto& fscale = plan.force_scale;
  torch::Tensor pair_force = g;
  if (!raw) {
    auto edge_fscale = B == 1 ? fscale.to(vec.scalar_type())
                              : fscale.to(vec.scalar_type()).index_select(0, graph.edge_system);
    pair_force = g * edge_fscale.unsqueeze(1);
  }
  // Sums into atoms in each atom's edge order (no float atomics on a GPU):
  // the same forces on every run, and a training step's second backward too.
  // The padding slots (zero rows, all at a system's last atom) are left out.
  const edges::NodeSums into_targets(edges::leave_out(graph.tgt, graph.valid, N), N);
  const edges::NodeSums into_sources(edges::leave_out(graph.src, graph.valid, N), N);
  ev.forces = into_targets(pair_force) - into_sources(pair_force);

  // dE/d strain = sum_edges r (x) dE/dr; the virial W = -dE/d strain.
  auto r_g = vec.detach().to(torch::kFloat64).unsqueeze(2) * g.to(torch::kFloat64).unsqueeze(1);
  auto de_dstrain = system_sum(r_g, graph.row_offsets, plan.sized.edge_block_lengths, twice);
  de_dstrain = (de_dstrain + de_dstrain.transpose(1, 2)) / 2;
  ev.virial = raw ? -de_dstrain : -de_dstrain * fscale.view({B, 1, 1});
  if (in.owned < 0 && raw)  // 0 instead of NaN without volume: a NaN would reach the gradient
    ev.stress = de_dstrain * torch::nan_to_num(geo.inv_volume, 0.0, 0.0, 0.0).view({B, 1, 1});
  else if (in.owned < 0)
    ev.stress = de_dstrain * (geo.inv_volume * plan.stress_scale).view({B, 1, 1}) +
                plan.stress_shift.view({B, 1, 1});
  if (what.atom_virial) {
    auto edge_half = B == 1 ? fscale * -0.5 : fscale.index_select(0, graph.edge_system) * -0.5;
    auto w = r_g * edge_half.view({-1, 1, 1});
    w = (w + w.transpose(1, 2)) / 2;
    ev.atom_virial = into_sources(w) + into_targets(w);
  }
  return ev;
}

}  // namespace uma
