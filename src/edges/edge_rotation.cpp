#include "edges/edge_rotation.h"

#include "graph/geometry_matmul.h"
#include "runtime/transfers.h"

#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <string>

namespace uma {
namespace {

namespace F = torch::nn::functional;

double dtype_eps(torch::ScalarType t) {
  return t == torch::kFloat64 ? std::numeric_limits<double>::epsilon()
                              : std::numeric_limits<float>::epsilon();
}

torch::Tensor normalize_clamped(const torch::Tensor& q, double eps) {
  return q / torch::sqrt(torch::clamp_min(q.pow(2).sum(-1, true), eps));
}

// C-infinity step: 0 for t <= 0, 1 for t >= 1, sigmoid((2t - 1) / (t (1 - t))) between.
torch::Tensor smooth_step(const torch::Tensor& t, double eps) {
  auto tc = t.clamp(0, 1);
  auto s = torch::sigmoid((2.0 * tc - 1.0) / torch::clamp_min(tc * (1.0 - tc), eps));
  s = torch::where(tc < eps, torch::zeros_like(s), s);
  return torch::where(tc > 1 - eps, torch::ones_like(s), s);
}

// Quaternion (w, x, y, z) rotating unit vector u onto +y.
torch::Tensor quaternion_to_y(const torch::Tensor& u) {
  const double eps = dtype_eps(u.scalar_type());
  auto ex = u.select(1, 0), ey = u.select(1, 1), ez = u.select(1, 2);
  auto zero = torch::zeros_like(ex);
  auto q1 = normalize_clamped(torch::stack({1.0 + ey, -ez, zero, ex}, -1), eps);  // singular at -y
  auto q2 = normalize_clamped(torch::stack({-ez, 1.0 - ey, ex, zero}, -1), eps);  // singular at +y
  auto s = smooth_step((ey + 0.9) / 1.8, eps).unsqueeze(-1);
  auto aligned = torch::where((q1 * q2).sum(-1, true) < 0, -q2, q2);
  return F::normalize((1.0 - s) * aligned + s * q1, F::NormalizeFuncOptions().dim(-1));
}

torch::Tensor rotation_matrix(const torch::Tensor& q) {
  auto w = q.select(1, 0), x = q.select(1, 1), y = q.select(1, 2), z = q.select(1, 3);
  auto row0 = torch::stack({1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)}, -1);
  auto row1 = torch::stack({2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)}, -1);
  auto row2 = torch::stack({2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)}, -1);
  return torch::stack({row0, row1, row2}, 1);  // [E, 3, 3]
}

// Orthonormal symmetric traceless 3x3 matrices A_m spanning the l = 2 real
// harmonics in e3nn's order (xz, xy, 2y^2 - x^2 - z^2, yz, z^2 - x^2), so
// that D2[m, k] = tr(A_m R A_k R^T) = sum_{abcd} A_m[a,b] A_k[c,d] R[b,c] R[a,d].
torch::Tensor l2_basis() {
  const double r2 = 1.0 / std::sqrt(2.0), r6 = 1.0 / std::sqrt(6.0);
  auto a = torch::zeros({5, 3, 3}, torch::kFloat64);
  auto A = a.accessor<double, 3>();  // host data
  A[0][0][2] = A[0][2][0] = r2;
  A[1][0][1] = A[1][1][0] = r2;
  A[2][0][0] = -r6;
  A[2][1][1] = 2 * r6;
  A[2][2][2] = -r6;
  A[3][1][2] = A[3][2][1] = r2;
  A[4][0][0] = -r2;
  A[4][2][2] = r2;
  return a;
}

// A constant built once per device and dtype (not once per call).
template <typename Make>
torch::Tensor cached(const char* name, const torch::TensorOptions& opts, Make make) {
  static std::mutex mutex;
  static std::map<std::string, torch::Tensor> cache;
  const std::string key = std::string(name) + "/" + opts.device().str() + "/" +
                          std::string(c10::toString(opts.dtype().toScalarType()));
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, upload(make(), opts)).first;
  return it->second;
}

// T[(b, c), (a, d), m, k] = A_m[a, b] A_k[c, d], so that
// D2 = (R (x) R) [E, 81] @ T [81, 25]: one GEMM instead of E x 5 tiny products.
torch::Tensor l2_coupling(const torch::TensorOptions& opts) {
  return cached("l2_coupling", opts, [] {
    auto A = l2_basis();
    return torch::einsum("mab,kcd->bcadmk", {A, A}).reshape({81, 25});
  });
}

}  // namespace

namespace {

// x's positions along `dim` picked by `order`; the gradient picks by `inverse`.
class Reordered : public torch::autograd::Function<Reordered> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               int64_t dim, const torch::Tensor& order,
                               const torch::Tensor& inverse) {
    ctx->saved_data["dim"] = dim;
    ctx->save_for_backward({order, inverse});
    return x.index_select(dim, order);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto s = ctx->get_saved_variables();
    return {Reordered::apply(grads[0], ctx->saved_data["dim"].toInt(), s[1], s[0]), {}, {}, {}};
  }
};

}  // namespace

torch::Tensor to_m_layout(const torch::Tensor& x, int64_t dim) {
  const auto opts = torch::dtype(torch::kLong).device(x.device());
  const auto order = cached("m_layout", opts, [] {
    return torch::tensor({0, 2, 6, 3, 7, 1, 5, 8, 4}, torch::kLong);  // host data
  });
  const auto inverse = cached("l_layout", opts, [] {
    return torch::tensor({0, 5, 1, 3, 8, 6, 2, 4, 7}, torch::kLong);  // host data
  });
  return Reordered::apply(x, dim, order, inverse);
}

torch::Tensor edge_wigner(const torch::Tensor& vec) {
  const int64_t edges = vec.size(0);
  auto u = F::normalize(vec, F::NormalizeFuncOptions().dim(-1));
  auto R = rotation_matrix(quaternion_to_y(u));  // [E, 3, 3]
  auto Rf = R.reshape({edges, 9});
  auto RR = (Rf.unsqueeze(2) * Rf.unsqueeze(1)).reshape({edges, 81});  // R[b,c] R[a,d]
  auto D2 = geometry_matmul(RR, l2_coupling(vec.options())).view({edges, 5, 5});
  auto D0 = torch::ones({edges, 1, 1}, vec.options());
  return F::pad(D0, F::PadFuncOptions({0, 8, 0, 8})) + F::pad(R, F::PadFuncOptions({1, 5, 1, 5})) +
         F::pad(D2, F::PadFuncOptions({4, 0, 4, 0}));
}

}  // namespace uma
