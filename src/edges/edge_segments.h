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

// node: [E] long, each edge's node in [0, nodes]; an edge of node `nodes`
// joins no segment (it sorts last, past offsets[nodes]).  On any device,
// without reading the device back.
EdgeSegments segments_by_node(const torch::Tensor& node, int64_t nodes);

// values: [E, ...] -> [nodes, ...]: each node's rows summed in the segments'
// order (so in the rows' order: the sort is stable), where `node` [E] and
// `segments` = segments_by_node(node, nodes).  No atomics: the same bits on
// every run, on any device.  Differentiable to any order: its backward is
// gather_rows, whose backward is segment_sum.
torch::Tensor segment_sum(const torch::Tensor& values, const torch::Tensor& node,
                          const EdgeSegments& segments);
// table: [nodes, ...] -> [E, ...]: table's row of each edge's node (index_select),
// with segment_sum as its backward (index_select's is a scatter of float atomics on CUDA).
torch::Tensor gather_rows(const torch::Tensor& table, const torch::Tensor& node,
                          const EdgeSegments& segments);

// The same two where the segments are not at hand: on the CPU, whose
// index_add adds rows one after another (deterministic, the same bits as
// segment_sum), ATen's index_add and index_select; elsewhere the segments
// are made (a sort) and the two above run.
torch::Tensor sum_into_nodes(const torch::Tensor& values, const torch::Tensor& node, int64_t nodes);
torch::Tensor gather_from_nodes(const torch::Tensor& table, const torch::Tensor& node);

}  // namespace uma::nn
