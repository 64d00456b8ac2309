// Rows of a small learned table (an embedding: elements, charges, spins)
// picked by many indices, with a gradient into the table that adds no float
// atomics where sums run in segments (edge_segments.h).
#pragma once

#include <torch/torch.h>

namespace uma::edges {

// table: [R, F], index: [n] long in [0, R) -> [n, F], table's row of each
// index.  The gradient into the table sums the rows that picked each table
// row: where sums_in_segments, as one product with the indices' one-hot
// matrix ([R, n] x [n, F], in float64 for a float32 table, so that TF32
// never touches it), the same bits on every run; else LibTorch's embedding,
// which on the CPU adds the rows one after another.  (In the product a
// non-finite gradient row reaches every table row, 0 x inf being NaN; a
// training step with a non-finite gradient is skipped either way.)  A table
// that needs no gradient is gathered plainly.  Differentiable to any order.
torch::Tensor table_rows(const torch::Tensor& table, const torch::Tensor& index);

}  // namespace uma::edges
