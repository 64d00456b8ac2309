// The stage "outputs" of an evaluation: energies in physical units, and from
// dE/dr_edge the forces, virials, stress and per-atom virials, each summed
// without float atomics (the same bits on every run).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "engine/evaluation.h"
#include "engine/staged_backward.h"
#include "engine/step_plan.h"
#include "engine/step_state.h"
#include "graph/batch.h"

namespace uma {

// Sums rows of `x` into B systems whose rows are contiguous blocks
// (`offsets`: [B + 1] host, `lengths`: [B] the same on the device):
// deterministic on every device.  `twice`: differentiable twice (a training
// step's second-order backward).
torch::Tensor system_sum(const torch::Tensor& x, const std::vector<int64_t>& offsets,
                         const torch::Tensor& lengths, bool twice);

// The evaluation of `step` (after the stage "backbone"), as `what` asks:
// the normalised energies always; with Request::gradients, the gradient
// dE/dr_edge (through `stages` where the model called collectives; with
// create_graph kept for a second backward) and what follows from it.
Evaluation assemble_outputs(const StepPlan& plan, const StepState& step, const Geometry& geo,
                            const Request& what, StagedBackward& stages);

}  // namespace uma
