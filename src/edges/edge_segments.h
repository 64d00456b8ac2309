// Edges grouped by the node they touch (CSR): the sums of per-edge terms into
// nodes become parallel segment sums over nodes instead of serial scatters.
#pragma once

#include <torch/torch.h>

namespace uma::nn {

struct EdgeSegments {
  torch::Tensor order;    // [E] long: edge indices sorted by node (stable)
  torch::Tensor offsets;  // [N + 1] long: node n's edges are order[offsets[n] : offsets[n+1]]
  bool defined() const { return order.defined(); }
};

// node: [E] long, each edge's node in [0, nodes).  On any device, without
// reading the device back.
EdgeSegments segments_by_node(const torch::Tensor& node, int64_t nodes);

}  // namespace uma::nn
