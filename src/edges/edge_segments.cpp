#include "edges/edge_segments.h"

namespace uma::nn {

EdgeSegments segments_by_node(const torch::Tensor& node, int64_t nodes) {
  EdgeSegments s;
  s.order = std::get<1>(node.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  auto counts =
      torch::bincount(node, /*weights=*/{}, nodes);  // host data: the lean pipeline is CPU-only
  s.offsets = torch::cat({torch::zeros({1}, counts.options()), counts.cumsum(0)});
  return s;
}

}  // namespace uma::nn
