#include "edges/edge_segments.h"

#include <atomic>

namespace uma::edges {
namespace {
std::atomic<int> cpu_in_segments{0};
}  // namespace

bool sums_in_segments(const torch::Device& device) {
  return !device.is_cpu() || cpu_in_segments.load() > 0;
}

SegmentSumsOnTheCpu::SegmentSumsOnTheCpu() { ++cpu_in_segments; }
SegmentSumsOnTheCpu::~SegmentSumsOnTheCpu() { --cpu_in_segments; }

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

EdgeSegments segments_by_node(const torch::Tensor& node, int64_t nodes) {
  EdgeSegments s;
  auto [sorted, order] = node.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  s.order = order;
  // offsets[n]: the first position holding a node >= n (shapes known on the
  // host: nothing is read back on a GPU)
  s.offsets = torch::searchsorted(sorted, torch::arange(nodes + 1, node.options()));
  return s;
}

namespace {

// The sums themselves: a gather into segment order, then one reduction per
// segment (ATen's segment_reduce: each output summed in order, no atomics).
torch::Tensor sum_segments(const torch::Tensor& values, const EdgeSegments& s) {
  return torch::segment_reduce(values.index_select(0, s.order), "sum", /*lengths=*/{},
                               /*indices=*/{}, /*offsets=*/s.offsets, /*axis=*/0,
                               /*unsafe=*/true, /*initial=*/0);
}

class GatherRows;

class SegmentSum : public torch::autograd::Function<SegmentSum> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& values,
                               const torch::Tensor& node, const torch::Tensor& order,
                               const torch::Tensor& offsets) {
    ctx->save_for_backward({node, order, offsets});
    return sum_segments(values, {order, offsets});
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads);
};

class GatherRows : public torch::autograd::Function<GatherRows> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& table,
                               const torch::Tensor& node, const torch::Tensor& order,
                               const torch::Tensor& offsets) {
    ctx->save_for_backward({node, order, offsets});
    auto zero_row = table.sizes().vec();
    zero_row[0] = 1;  // the row of node `nodes`
    return torch::cat({table, torch::zeros(zero_row, table.options())}).index_select(0, node);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    return {SegmentSum::apply(grads[0], s[0], s[1], s[2]), {}, {}, {}};
  }
};

variable_list SegmentSum::backward(AutogradContext* ctx, variable_list grads) {
  const auto s = ctx->get_saved_variables();
  return {GatherRows::apply(grads[0], s[0], s[1], s[2]), {}, {}, {}};
}

}  // namespace

torch::Tensor segment_sum(const torch::Tensor& values, const torch::Tensor& node,
                          const EdgeSegments& segments) {
  return SegmentSum::apply(values, node, segments.order, segments.offsets);
}

torch::Tensor gather_rows(const torch::Tensor& table, const torch::Tensor& node,
                          const EdgeSegments& segments) {
  return GatherRows::apply(table, node, segments.order, segments.offsets);
}

torch::Tensor leave_out(const torch::Tensor& node, const torch::Tensor& keep, int64_t nodes) {
  return torch::where(keep, node, nodes);
}

NodeSums::NodeSums(torch::Tensor node, int64_t nodes) : node_(std::move(node)), nodes_(nodes) {
  if (sums_in_segments(node_.device())) segments_ = segments_by_node(node_, nodes_);
}

torch::Tensor NodeSums::operator()(const torch::Tensor& values) const {
  if (!segments_.defined()) {
    auto shape = values.sizes().vec();
    shape[0] = nodes_ + 1;  // the last row takes what is left out
    return torch::zeros(shape, values.options()).index_add(0, node_, values).narrow(0, 0, nodes_);
  }
  return segment_sum(values, node_, segments_);
}

torch::Tensor sum_into_nodes(const torch::Tensor& values, const torch::Tensor& node,
                             int64_t nodes) {
  if (nodes == 1 && sums_in_segments(values.device())) return values.sum(0, /*keepdim=*/true);
  return NodeSums(node, nodes)(values);
}

torch::Tensor gather_from_nodes(const torch::Tensor& table, const torch::Tensor& node) {
  if (!sums_in_segments(table.device())) return table.index_select(0, node);
  if (table.size(0) == 1) {
    auto shape = table.sizes().vec();
    shape[0] = node.size(0);
    return table.expand(shape);
  }
  return gather_rows(table, node, segments_by_node(node, table.size(0)));
}

}  // namespace uma::edges
