#include "edges/edge_segments.h"

namespace uma::nn {

EdgeSegments segments_by_node(const torch::Tensor& node, int64_t nodes) {
  EdgeSegments s;
  auto [sorted, order] = node.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  s.order = order;
  // offsets[n]: the first position holding a node >= n (shapes known on the
  // host: nothing is read back on a GPU)
  s.offsets = torch::searchsorted(sorted, torch::arange(nodes + 1, node.options()));
  return s;
}

}  // namespace uma::nn
