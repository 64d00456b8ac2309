#include "graph/geometry_matmul.h"

namespace uma {

torch::Tensor geometry_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  const bool tf32 = at::globalContext().allowTF32CuBLAS();
  if (!tf32 || a.scalar_type() != torch::kFloat32 || b.scalar_type() != torch::kFloat32)
    return a.matmul(b);
  return a.to(torch::kFloat64).matmul(b.to(torch::kFloat64)).to(torch::kFloat32);
}

}  // namespace uma
