// What one evaluation builds on its way through the stages of Engine::run
// (graph, plan, backbone, outputs): the neighbour graph, the edge vectors the
// energy is differentiated by, the model's edge input and its raw energies.
// It lives for one step; the step plan (step_plan.h) keeps what outlives it.
#pragma once

#include <cstdint>

#include <torch/torch.h>

#include "graph/radius_graph.h"
#include "model/backbone.h"

namespace uma {

struct StepState {
  int64_t systems = 0, nodes = 0;  // B, N (a piece: owned atoms and ghosts)
  RadiusGraph graph;
  // [E, 3] the edge vectors, requiring grad: the leaves that forces and
  // virials both follow from (dE/dr_edge).
  torch::Tensor vec;
  EdgeInput edges;           // the backbone's edges, sized by the stage "plan"
  torch::Tensor raw_atom;    // [N] float64: each atom's energy in the model's units (ghosts 0)
  torch::Tensor raw_energy;  // [B] float64: their sums per system
  torch::Tensor features;    // node features, where the request asks for them
};

}  // namespace uma
