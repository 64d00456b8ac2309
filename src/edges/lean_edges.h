// The lean edge pipeline of one block (CPU): fused operators that write each
// edge-sized tensor once, in the layout its consumer reads.
//
//  rotate_to_edge_frame   node features of source and target -> edge frame
//                         (per l-block: 1 + 3x3 + 5x5 of the 9x9 Wigner
//                         matrix), times the radial weights, straight into
//                         the three m-pieces the SO(2) convolution multiplies.
//  gate_m_pieces          the gate activation between the two convolutions,
//                         piece by piece (no concatenation).
//  rotate_to_nodes_summed edge frame -> node frame, times the envelope, summed
//                         into the targets as a segment sum per node.
//
// M-layout rows (as in so2_conv.h): [l0m0, l1m0, l2m0 | l1+1, l2+1, l1-1,
// l2-1 | l2+2, l2-2] in three pieces of 3, 4 and 2 rows.  D is the Wigner
// matrix in L-layout [E, 9, 9] (edge_rotation.h).  Sums into nodes run over
// EdgeSegments; segment entries >= E are skipped, so that the first E edges
// of a longer graph can use that graph's segments.
//
// Derivatives of first and second order (training's conserving step: forces
// and stress by create_graph, then the loss's backward).  Each operator is
// linear in each of its tensor inputs (the rotations) or elementwise (the
// gate), so its backward is the same kernels with the roles turned, itself an
// autograd function whose backward (the double backward) is written out of
// the kernels' tangents and gradients, and the gate's second derivatives by
// hand.  A third derivative is refused.
#pragma once

#include <array>

#include <torch/torch.h>

#include "edges/edge_segments.h"

namespace uma::edges {

using MPieces = std::array<torch::Tensor, 3>;  // [E, 3, ch], [E, 4, ch], [E, 2, ch]

// x: [N, 9, C] L-layout; radial: [E, 6 * 2C] with rows (l0m0, l1m0, l2m0,
// l1 for m = +-1, l2 for m = +-1, l2 for m = +-2) of 2C channels (source C
// first).  Returns the M-layout message pieces with 2C channels each.
MPieces rotate_to_edge_frame(const torch::Tensor& D, const torch::Tensor& x,
                             const torch::Tensor& src, const torch::Tensor& tgt,
                             const torch::Tensor& radial, const EdgeSegments& by_source,
                             const EdgeSegments& by_target);

// What the gate keeps for its backward: its sigmoids (3H per edge), or its
// inputs only, the sigmoids recomputed in the backward (one elementwise pass:
// about 1% of a CPU evaluation, measured; 0.5 GB fewer at the peak of a
// 1,000-atom Cu evaluation of UMA-S, 4 blocks x 82k edges x 3H floats).
enum class GateSigmoids { kKept, kRecomputed };

// y0: [E, 2H + 3H] (the gate logits of l = 1 and 2, then the three m = 0
// rows), y1: [E, 4, H], y2: [E, 2, H].  Returns the gated pieces: silu on
// l0m0, sigmoid(logit_l) on every row of degree l.
MPieces gate_m_pieces(const torch::Tensor& y0, const torch::Tensor& y1, const torch::Tensor& y2,
                      GateSigmoids sigmoids = GateSigmoids::kKept);

// pieces: M-layout [E, 3, C], [E, 4, C], [E, 2, C] (pieces 1 and 2 may be
// undefined: rows m != 0 are zero).  Returns [nodes, 9, C] L-layout:
// out[n] = sum over edges e into n of envelope[e] * D[e]^T y[e].
torch::Tensor rotate_to_nodes_summed(const torch::Tensor& D, const torch::Tensor& envelope,
                                     const MPieces& pieces, const torch::Tensor& tgt,
                                     const EdgeSegments& by_target, int64_t nodes);

}  // namespace uma::edges
