// The M rows of an edge tensor held as three pieces: rows 0..2 (l0m0, l1m0,
// l2m0), 3..6 (m = +-1) and 7..8 (m = +-2), each [E, rows, channels] with
// channels contiguous.  For the host and for CUDA (edges/kernels/device.h).
#pragma once

#include <cstdint>

#include "edges/kernels/device.h"

namespace uma::edges::kernels {

// The piece that holds M row j, and j's row within it.
UMA_BODY constexpr int piece_of(int j) { return j < 3 ? 0 : j < 7 ? 1 : 2; }
UMA_BODY constexpr int piece_row(int j) { return j < 3 ? j : j < 7 ? j - 3 : j - 7; }

template <typename T>
struct Rows {
  T* base[3] = {nullptr, nullptr, nullptr};
  int64_t edge_stride[3] = {0, 0, 0}, row_stride[3] = {0, 0, 0};
  // On CUDA the piece is picked by selects, not by indexing: a row known only
  // at run time (a thread's) then keeps the struct in registers.
  UMA_BODY T* row(int64_t e, int j) const {
    const int p = piece_of(j);
#if defined(__CUDA_ARCH__)
    const auto pick = [p](auto a0, auto a1, auto a2) { return p == 0 ? a0 : p == 1 ? a1 : a2; };
    return pick(base[0], base[1], base[2]) +
           e * pick(edge_stride[0], edge_stride[1], edge_stride[2]) +
           piece_row(j) * pick(row_stride[0], row_stride[1], row_stride[2]);
#else
    return base[p] + e * edge_stride[p] + piece_row(j) * row_stride[p];
#endif
  }
};

}  // namespace uma::edges::kernels
