// The node-level layers against their per-degree reference forms: values,
// first and second derivatives (training differentiates forces once more).
#include <gtest/gtest.h>

#include "model/nn/so3.h"
#include "test_util.h"

namespace uma::nn {
namespace {

using torch::autograd::grad;

// The equivariant RMS norm degree by degree (the reference form): the l = 0
// row centred, each degree's mean square over its 2l + 1 rows, their mean
// over the degrees and the channels, then the affine map per degree.
torch::Tensor rms_norm_by_degree(const torch::Tensor& x, const torch::Tensor& weight,
                                 const torch::Tensor& bias) {
  auto by_l = x.split_with_sizes({1, 3, 5}, 1);
  auto x0 = by_l[0] - by_l[0].mean(2, true);
  auto mean_square =
      (x0.pow(2).mean(1, true) + by_l[1].pow(2).mean(1, true) + by_l[2].pow(2).mean(1, true)) / 3.0;
  auto scale = (mean_square.mean(2, true) + 1e-5).pow(-0.5);
  return torch::cat(
      {x0 * scale * weight[0] + bias, by_l[1] * scale * weight[1], by_l[2] * scale * weight[2]}, 1);
}

// Value, the gradients of sum(y^2 * s) w.r.t. x, weight and bias, and the
// second derivatives of a function of the first w.r.t. x and weight.
std::vector<torch::Tensor> derivatives(const torch::Tensor& y, const torch::Tensor& x,
                                       const torch::Tensor& weight, const torch::Tensor& bias) {
  auto s = torch::linspace(0.5, 1.5, y.numel(), y.options()).view(y.sizes());
  auto g = grad({(y.pow(2) * s).sum()}, {x, weight, bias}, {}, true, true);
  auto gg =
      grad({g[0].sin().sum() + g[1].pow(2).sum() + (g[2] * g[2].detach()).sum()}, {x, weight});
  return {y.detach(), g[0].detach(), g[1].detach(), g[2].detach(), gg[0], gg[1]};
}

TEST(RMSNormSH, EqualsThePerDegreeForm) {
  const auto device = test::test_device();
  const int64_t N = 7, C = 6;
  RMSNormSH norm(C);
  norm->to(device, torch::kFloat64);
  torch::manual_seed(3);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : norm->named_parameters())
      p.value().copy_(torch::randn(p.value().sizes(), torch::kFloat64) * 0.3 + 1.0);
  }
  // Rows of very different sizes per degree, so that a wrong degree weight shows.
  auto x = (torch::randn({N, 9, C}, torch::kFloat64) *
            torch::tensor({2.0, 0.5, 0.5, 0.5, 1.5, 1.5, 1.5, 1.5, 1.5}, torch::kFloat64)
                .view({1, 9, 1}))
               .to(device)
               .requires_grad_(true);
  const auto weight = norm->named_parameters()["affine_weight"];
  const auto bias = norm->named_parameters()["affine_bias"];
  const auto ours = derivatives(norm->forward(x), x, weight, bias);
  const auto theirs = derivatives(rms_norm_by_degree(x, weight, bias), x, weight, bias);
  const char* names[] = {"value", "d/dx", "d/dweight", "d/dbias", "d2/dx", "d2/dweight"};
  for (size_t i = 0; i < ours.size(); ++i) {
    const double scale = theirs[i].abs().max().item<double>();
    EXPECT_GT(scale, 0) << names[i];
    EXPECT_LT((ours[i] - theirs[i]).abs().max().item<double>(), 1e-12 * scale) << names[i];
  }
  // In float32 on the same module (its constants follow the input's precision).
  norm->to(torch::kFloat32);
  auto y32 = norm->forward(x.detach().to(torch::kFloat32));
  EXPECT_EQ(y32.scalar_type(), torch::kFloat32);
  EXPECT_LT((y32.to(torch::kFloat64) - ours[0]).abs().max().item<double>(),
            1e-5 * ours[0].abs().max().item<double>());
}

}  // namespace
}  // namespace uma::nn
