#include "train/committee.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/uma_error.h"

namespace uma::train {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// uniform(-bound, bound) [K, rows, cols] from the generator, on the host in float64
torch::Tensor uniform(at::Generator& gen, int64_t K, int64_t rows, int64_t cols, double bound) {
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  return torch::rand({K, rows, cols}, gen, opts) * (2 * bound) - bound;
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double mean_rank = 0.5 * static_cast<double>(i + j) + 1.0;
    for (size_t k = i; k <= j; ++k) r[order[k]] = mean_rank;
    i = j + 1;
  }
  return r;
}

}  // namespace

CommitteeImpl::CommitteeImpl(int64_t K, int64_t C, int64_t H, uint64_t seed) : members_(K) {
  if (K < 2) throw Error("a committee needs at least 2 members, got " + std::to_string(K));
  auto gen = at::detail::createCPUGenerator(seed);
  const double bc = 1.0 / std::sqrt(static_cast<double>(C)),
               bh = 1.0 / std::sqrt(static_cast<double>(H));
  w0_ = register_parameter("w0", uniform(gen, K, C, H, bc));
  b0_ = register_parameter("b0", uniform(gen, K, 1, H, bc));
  w1_ = register_parameter("w1", uniform(gen, K, H, H, bh));
  b1_ = register_parameter("b1", uniform(gen, K, 1, H, bh));
  w2_ = register_parameter("w2", uniform(gen, K, H, 1, bh));
  b2_ = register_parameter("b2", uniform(gen, K, 1, 1, bh));
}

torch::Tensor CommitteeImpl::forward(const torch::Tensor& scalars) {
  auto x = scalars.unsqueeze(0).expand({members_, scalars.size(0), scalars.size(1)});  // [K, N, C]
  auto h = torch::silu(torch::baddbmm(b0_, x, w0_));                                   // [K, N, H]
  h = torch::silu(torch::baddbmm(b1_, h, w1_));                                        // [K, N, H]
  return torch::baddbmm(b2_, h, w2_).squeeze(2);                                       // [K, N]
}

int bootstrap_count(uint64_t seed, int64_t member, int64_t sample) {
  const uint64_t h =
      mix(mix(mix(seed) ^ static_cast<uint64_t>(member)) ^ static_cast<uint64_t>(sample));
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  // Poisson(1) by inversion: P(0) = P(1) = e^-1, P(k) = e^-1 / k!
  double p = std::exp(-1.0), cumulative = p;
  int k = 0;
  while (u >= cumulative && k < 20) {
    ++k;
    p /= k;
    cumulative += p;
  }
  return k;
}

torch::Tensor committee_loss(const torch::Tensor& e, const torch::Tensor& target,
                             const torch::Tensor& weights, const torch::Tensor& inverse_totals) {
  auto d = e.to(torch::kFloat64) - target.to(torch::kFloat64).view({1, -1});  // [K, N]
  return ((d * d * weights).sum(1) * inverse_totals).sum();
}

torch::Tensor committee_spread(const torch::Tensor& e) {
  return (e - e.mean(1, /*keepdim=*/true)).std(0, /*unbiased=*/true);
}

double rank_correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size();
  if (n != b.size()) throw Error("rank_correlation: series of different lengths");
  if (n < 3) return std::numeric_limits<double>::quiet_NaN();
  const auto ra = ranks(a), rb = ranks(b);
  const double mean = 0.5 * static_cast<double>(n + 1);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0 || sbb == 0) return std::numeric_limits<double>::quiet_NaN();
  return sab / std::sqrt(saa * sbb);
}

}  // namespace uma::train
