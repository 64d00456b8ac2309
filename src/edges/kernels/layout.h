// The L/M layout of an edge tensor's 9 rows (l <= 2) that every edge kernel
// shares, for the host and CUDA: each table packed into an integer (4 bits
// an entry), so that a row index known only at run time (a CUDA thread's)
// costs a shift, not a load.
#pragma once

#include <type_traits>

#include "edges/kernels/device.h"

namespace uma::edges::kernels {

// M row j (0..8) holds L row l_row(j): {0, 2, 6, 3, 7, 1, 5, 8, 4}.
UMA_BODY constexpr int l_row(int j) { return int((0x485173620ULL >> (4 * j)) & 0xF); }

// L row r's l-block: its first column of D, and its width (2l + 1).
UMA_BODY constexpr int block_start(int r) { return r == 0 ? 0 : r < 4 ? 1 : 4; }
UMA_BODY constexpr int block_size(int r) { return r == 0 ? 1 : r < 4 ? 3 : 5; }

// The degree l of M row j (of its L row): 0 for row 0, 1 for rows 1, 3, 5,
// 2 for the others; an l-block starts at column l * l.
UMA_BODY constexpr int degree(int j) { return (block_size(l_row(j)) - 1) / 2; }

// The M rows of degree l, ascending: rows_of_degree(l) of them, the i-th is
// row_of_degree(l, i) (the first, i = 0, is the m = 0 row).
UMA_BODY constexpr int rows_of_degree(int l) { return 2 * l + 1; }
UMA_BODY constexpr int row_of_degree(int l, int i) {
  return l == 0 ? 0 : l == 1 ? 1 + 2 * i : int((0x87642 >> (4 * i)) & 0xF);
}

// The radial weight row (of 6) that scales M row j: {0, 1, 2, 3, 4, 3, 4, 5, 5};
// radial_first(j): j is the first M row that this radial row scales.
UMA_BODY constexpr int radial_row(int j) { return int((0x554343210ULL >> (4 * j)) & 0xF); }
UMA_BODY constexpr bool radial_first(int j) { return (0x9F >> j) & 1; }

// The M rows that radial row rr scales, ascending: rows_of_radial(rr) of them
// (rr alone below 3; then 3 and 5, 4 and 6, 7 and 8), the i-th row_of_radial(rr, i).
UMA_BODY constexpr int rows_of_radial(int rr) { return rr < 3 ? 1 : 2; }
UMA_BODY constexpr int row_of_radial(int rr, int i) { return rr == 5 ? 7 + i : rr + 2 * i; }

// f(std::integral_constant<int, v>()) for v, one of V0, V1 and V2 (V2 for
// any other), so that the body sees v as a constant.
template <int V0, int V1, int V2, typename F>
UMA_BODY void with_one_of(int v, F&& f) {
  if (v == V0)
    f(std::integral_constant<int, V0>());
  else if (v == V1)
    f(std::integral_constant<int, V1>());
  else
    f(std::integral_constant<int, V2>());
}

// For an l-block's width K (1, 3 or 5): the body's loop over the block is
// then a fixed, unrolled sum.
template <typename F>
UMA_BODY void with_block_size(int K, F&& f) {
  with_one_of<1, 3, 5>(K, static_cast<F&&>(f));
}

// For a degree l (0, 1 or 2).
template <typename F>
UMA_BODY void with_degree(int l, F&& f) {
  with_one_of<0, 1, 2>(l, static_cast<F&&>(f));
}

}  // namespace uma::edges::kernels
