#include "model/nn/radial.h"

#include "runtime/transfers.h"

namespace uma::nn {

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
  return {basis.narrow(0, 0, n), source_elements.narrow(0, 0, n),
          target_elements.narrow(0, 0, n), source_table, target_table};
}

torch::Tensor RadialMLPImpl::forward(const RadialInput& in) {
  const auto& first = net[0]->as<torch::nn::Linear>();
  const int64_t K = in.basis.size(1), Ec = in.source_table.size(1);
  // weight [out, K + 2 Ec]: basis, source and target columns
  const auto& w = first->weight;
  auto source_rows = torch::linear(in.source_table, w.narrow(1, K, Ec), first->bias);
  auto target_rows = torch::linear(in.target_table, w.narrow(1, K + Ec, Ec));
  // in place on the gathered rows: two [E, out] tensors made, not five (on
  // the CPU each new one is paged in afresh)
  auto h = torch::embedding(source_rows, in.source_elements)
               .addmm_(in.basis, w.narrow(1, 0, K).t())
               .add_(torch::embedding(target_rows, in.target_elements));
  for (auto layer = net->begin() + 1; layer != net->end(); ++layer)
    h = layer->forward<torch::Tensor>(h);
  return h;
}

}  // namespace uma::nn
