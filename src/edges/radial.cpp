#include "edges/radial.h"

#include "edges/table_rows.h"
#include "runtime/transfers.h"

namespace uma::edges {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class LayerNormSiLU : public torch::autograd::Function<LayerNormSiLU> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
    auto normed = std::get<0>(at::native_layer_norm(x, {x.size(-1)}, weight, bias, eps));
    ctx->save_for_backward({x, weight, bias});
    ctx->saved_data["eps"] = eps;
    return torch::silu_(normed);
  }

  // Differentiable (under create_graph, as ATen's SiLU: its derivative in
  // differentiable ops there): the recomputed normalisation carries the
  // derivatives through x, weight and bias; mean and 1/std enter layer
  // norm's backward as constants, as in ATen's own double backward.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const auto &x = s[0], &weight = s[1], &bias = s[2];
    const double eps = ctx->saved_data["eps"].toDouble();
    const int64_t C = x.size(-1);
    auto [normed, mean, rstd] = at::native_layer_norm(x, {C}, weight, bias, eps);
    const auto& grad = grads[0];
    torch::Tensor g;
    if (torch::GradMode::is_enabled()) {  // ATen's silu_backward has no derivative
      auto sigmoid = torch::sigmoid(normed);
      g = grad * sigmoid * (1 + normed * (1 - sigmoid));
    } else {
      g = at::silu_backward(grad, normed);
    }
    auto [gx, gweight, gbias] = at::native_layer_norm_backward(
        g, x, {C}, mean.detach(), rstd.detach(), weight, bias,
        {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)});
    return {gx, gweight, gbias, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor layer_norm_silu(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& bias, double eps) {
  return LayerNormSiLU::apply(x, weight, bias, eps);
}

GaussianBasis::GaussianBasis(double cutoff, int num_basis) {
  auto coeff = [](const torch::Tensor& mu) {  // mu: a CPU tensor
    const double spacing =
        (mu[1] - mu[0]).to(torch::kFloat64).sum().data_ptr<double>()[0];  // host data
    return -0.5 / ((2.0 * spacing) * (2.0 * spacing));
  };
  offsets32_ = torch::linspace(0.0, cutoff, num_basis, torch::kFloat32);
  offsets64_ = torch::linspace(0.0, cutoff, num_basis, torch::kFloat64);
  coeff32_ = coeff(offsets32_);
  coeff64_ = coeff(offsets64_);
}

torch::Tensor GaussianBasis::operator()(const torch::Tensor& distance) const {
  const bool fp64 = distance.scalar_type() == torch::kFloat64;
  auto& on_device = fp64 ? device64_ : device32_;
  if (!on_device.defined() || on_device.device() != distance.device())  // once per device
    on_device = upload(fp64 ? offsets64_ : offsets32_, distance.options());
  const auto& mu = on_device;
  auto diff = distance.view({-1, 1}) - mu.view({1, -1});
  return torch::exp((fp64 ? coeff64_ : coeff32_) * diff.pow(2));
}

torch::Tensor polynomial_envelope(const torch::Tensor& x) {
  constexpr double p = 5.0;
  constexpr double a = -(p + 1) * (p + 2) / 2, b = p * (p + 2), c = -p * (p + 1) / 2;
  auto value = 1 + x.pow(p) * (a + x * (b + c * x));
  return torch::where(x < 1, value, torch::zeros_like(value));
}

RadialMLPImpl::RadialMLPImpl(const std::vector<int64_t>& channels) {
  net = torch::nn::Sequential();
  for (size_t i = 1; i < channels.size(); ++i) {
    net->push_back(torch::nn::Linear(channels[i - 1], channels[i]));
    if (i + 1 == channels.size()) break;
    net->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({channels[i]}).eps(1e-5)));
    net->push_back(torch::nn::SiLU());
  }
  register_module("net", net);
}

RadialInput RadialInput::first(int64_t n) const {
  RadialInput part = *this;
  for (auto* t : {&part.basis, &part.source_elements, &part.target_elements})
    if (t->defined()) *t = t->narrow(0, 0, n);
  return part;
}

torch::Tensor RadialMLPImpl::forward(const RadialInput& in) {
  const auto& first = net[0]->as<torch::nn::Linear>();
  const int64_t K = in.basis.size(1), Ec = in.source_table.size(1);
  // weight [out, K + 2 Ec]: basis, source and target columns
  const auto& w = first->weight;
  TORCH_CHECK(w.size(1) == K + 2 * Ec && in.target_table.size(1) == Ec,
              "RadialMLP: a first layer of ", w.size(1), " inputs for ", K, " basis functions and ",
              in.source_table.size(1), " + ", in.target_table.size(1), " embedding channels");
  auto source_rows = torch::linear(in.source_table, w.narrow(1, K, Ec), first->bias);
  auto target_rows = torch::linear(in.target_table, w.narrow(1, K + Ec, Ec));
  // in place on the gathered rows: two [E, out] tensors made, not five (on
  // the CPU each new one is paged in afresh)
  auto h = table_rows(source_rows, in.source_elements)
               .addmm_(in.basis, w.narrow(1, 0, K).t())
               .add_(table_rows(target_rows, in.target_elements));
  for (size_t i = 1; i < net->size(); ++i) {
    if (auto* norm = net[i]->as<torch::nn::LayerNorm>()) {  // followed by its SiLU
      // Frozen weights (MD): fused, keeping less for the backward.  Trained
      // weights: the composition, whose twice-differentiated backward (a
      // training step's) has one layer norm less to run than the fused op's
      // (a CPU training step took ~8% longer fused).
      h = norm->weight.requires_grad()
              ? torch::silu(norm->forward(h))
              : layer_norm_silu(h, norm->weight, norm->bias, norm->options.eps());
      ++i;
    } else {
      h = net[i]->as<torch::nn::Linear>()->forward(h);
    }
  }
  return h;
}

}  // namespace uma::edges
