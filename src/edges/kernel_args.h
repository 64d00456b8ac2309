// Tensors as the lean kernels' ops take them (edges/kernels/*_ops.h): raw
// pointers on the tensor's own device and row views of M-layout pieces, and
// a call per floating type.
#pragma once

#include <torch/torch.h>

#include <string>
#include <type_traits>

#include "core/uma_error.h"
#include "edges/kernels/rows.h"
#include "edges/lean_edges.h"

namespace uma::edges {

// Null for an undefined or empty tensor (an output not wanted).
template <typename T>
T* data_of(const torch::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return nullptr;
  return t.data_ptr<std::remove_const_t<T>>();
}
template <typename T>
const T* data_in(const torch::Tensor& t) {
  return data_of<const T>(t);
}

// The three pieces' rows; a piece undefined or empty has no base.
template <typename T>
kernels::Rows<T> rows_of(const MPieces& p) {
  kernels::Rows<T> r;
  for (int i = 0; i < 3; ++i) {
    if (!p[i].defined() || p[i].numel() == 0) continue;
    if (p[i].dim() != 3 || p[i].stride(2) != 1)
      throw Error("internal: an M-layout piece needs contiguous channels");
    r.base[i] = data_of<T>(p[i]);
    r.edge_stride[i] = p[i].stride(0);
    r.row_stride[i] = p[i].stride(1);
  }
  return r;
}

// f(T()) for t's floating type T (float or double).
template <typename F>
void for_scalar(const torch::Tensor& t, F&& f) {
  if (t.scalar_type() == torch::kFloat64)
    f(double());
  else if (t.scalar_type() == torch::kFloat32)
    f(float());
  else
    throw Error(std::string("internal: the lean edge operators take float32 or float64, not ") +
                c10::toString(t.scalar_type()));
}

}  // namespace uma::edges
