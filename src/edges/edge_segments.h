// Edges grouped by the node they touch (CSR): the sums of per-edge terms into
// nodes become parallel segment sums over nodes instead of serial scatters.
#pragma once

#include <torch/torch.h>

namespace uma::edges {

// How the sums of many rows into fewer (edges into atoms, atoms into
// systems, gathered rows back into a table) run on `device`: as segment
// sums in a fixed order (no float atomics: the same bits on every run)
// everywhere but on the CPU, where ATen's index_add and embedding backward
// already add rows one after another, in the rows' order.  While a
// SegmentSumsOnTheCpu lives, the CPU takes the segment path too, so that
// the CPU tests run the order of operations a GPU runs.
bool sums_in_segments(const torch::Device& device);

// Process-wide while it lives (autograd's backward may run on other threads).
class SegmentSumsOnTheCpu {
 public:
  SegmentSumsOnTheCpu();
  ~SegmentSumsOnTheCpu();
  SegmentSumsOnTheCpu(const SegmentSumsOnTheCpu&) = delete;
  SegmentSumsOnTheCpu& operator=(const SegmentSumsOnTheCpu&) = delete;
};

struct EdgeSegments {
  torch::Tensor order;    // [E] long: edge indices sorted by node (stable)
  torch::Tensor offsets;  // [N + 1] long: node n's edges are order[offsets[n] : offsets[n+1]]
  bool defined() const { return order.defined(); }
};

// node: [E] long, each edge's node in [0, nodes]; an edge of node `nodes`
// joins no segment (it sorts last, past offsets[nodes]).  On any device,
// without reading the device back.
EdgeSegments segments_by_node(const torch::Tensor& node, int64_t nodes);

// node where keep, else `nodes` (the row joins no segment): e.g. a graph's
// padding slots, which all point at a system's last atom, left out of the
// sums into atoms (in a segment, thousands of them would be one CUDA
// thread's serial loop).
torch::Tensor leave_out(const torch::Tensor& node, const torch::Tensor& keep, int64_t nodes);

// values: [E, ...] -> [nodes, ...]: each node's rows summed in the segments'
// order (so in the rows' order: the sort is stable), where `node` [E] and
// `segments` = segments_by_node(node, nodes); rows of node `nodes` are left
// out.  No atomics: the same bits on every run, on any device.
// Differentiable to any order: its backward is gather_rows, whose backward
// is segment_sum.
torch::Tensor segment_sum(const torch::Tensor& values, const torch::Tensor& node,
                          const EdgeSegments& segments);
// table: [nodes, ...] -> [E, ...]: table's row of each edge's node, a zero row
// for node `nodes`, with segment_sum as its backward (index_select's is a
// scatter of float atomics on CUDA).
torch::Tensor gather_rows(const torch::Tensor& table, const torch::Tensor& node,
                          const EdgeSegments& segments);

// Several sums into the nodes of the same edges, node: [E] in [0, nodes]
// (rows of node `nodes` left out): where sums_in_segments, segment_sum over
// segments made once (a sort); else ATen's index_add, which adds rows one
// after another (the same bits as segment_sum).
class NodeSums {
 public:
  NodeSums(torch::Tensor node, int64_t nodes);
  torch::Tensor operator()(const torch::Tensor& values) const;  // [E, ...] -> [nodes, ...]

 private:
  torch::Tensor node_;
  int64_t nodes_;
  EdgeSegments segments_;  // where sums_in_segments only
};

// One sum, or one gather, where the segments are not at hand; node in
// [0, nodes).  Into a single node (one system's atoms) in segments, a plain
// reduction (sum over the rows, whose backward is an expansion, and the
// reverse): one segment of thousands of rows would be a serial loop per
// column.
torch::Tensor sum_into_nodes(const torch::Tensor& values, const torch::Tensor& node, int64_t nodes);
torch::Tensor gather_from_nodes(const torch::Tensor& table, const torch::Tensor& node);

}  // namespace uma::edges
