#include "halo_exchange.h"

#include <algorithm>
#include <cstring>

#include "transfers.h"

using namespace LAMMPS_NS;

namespace {

// The exchange as one autograd node: forward owners -> ghosts, backward the
// ghosts' gradients -> owners.
class ExchangeFunction : public torch::autograd::Function<ExchangeFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, int64_t halo) {
    ctx->saved_data["halo"] = halo;
    return reinterpret_cast<HaloExchange*>(halo)->owners_to_ghosts(x);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad) {
    auto* halo = reinterpret_cast<HaloExchange*>(ctx->saved_data["halo"].toInt());
    return {halo->ghosts_to_owners(grad[0]), torch::Tensor()};
  }
};

// Shape of `x` with `rows` rows.
std::vector<int64_t> rows_like(const torch::Tensor& x, int64_t rows) {
  auto shape = x.sizes().vec();
  shape[0] = rows;
  return shape;
}

}  // namespace

void HaloExchange::set_atoms(const std::vector<int>* index, int n_owned, int nall) {
  index_ = index;
  n_owned_ = n_owned;
  nall_ = nall;
}

void HaloExchange::resize(int width) {
  width_ = width;
  const size_t need = static_cast<size_t>(nall_) * width_;
  if (rows_.size() < need) rows_.resize(need);
}

torch::Tensor HaloExchange::apply(const torch::Tensor& x) {
  return ExchangeFunction::apply(x, reinterpret_cast<int64_t>(this));
}

torch::Tensor HaloExchange::owners_to_ghosts(const torch::Tensor& x) {
  const int64_t N = x.size(0), n = static_cast<int64_t>(index_->size()), ghosts = n - n_owned_;
  resize(static_cast<int>(x.numel() / std::max<int64_t>(N, 1)));
  const size_t bytes = sizeof(double) * width_;
  if (n_owned_ > 0) {   // one counted read of the owned rows
    const auto owned = uma::to_host(x.narrow(0, 0, n_owned_).reshape({n_owned_, width_}).to(torch::kFloat64));
    const double* src = owned.data_ptr<double>();   // host data
    for (int k = 0; k < n_owned_; ++k) std::memcpy(row((*index_)[k]), src + static_cast<size_t>(k) * width_, bytes);
  }
  forward_comm(width_);
  torch::Tensor ghost_rows = x.narrow(0, n_owned_, 0);
  if (ghosts > 0) {   // one counted upload of the ghost rows
    auto host = torch::empty({ghosts, width_}, torch::kFloat64);
    double* dst = host.data_ptr<double>();   // host data
    for (int64_t k = 0; k < ghosts; ++k) std::memcpy(dst + k * width_, row((*index_)[n_owned_ + k]), bytes);
    ghost_rows = uma::upload(host, x.options()).view(rows_like(x, ghosts));
  }
  return torch::cat({x.narrow(0, 0, n_owned_), ghost_rows, x.narrow(0, n, N - n)});
}

torch::Tensor HaloExchange::ghosts_to_owners(const torch::Tensor& grad) {
  if (!grad.defined()) return grad;
  const int64_t N = grad.size(0), n = static_cast<int64_t>(index_->size()), ghosts = n - n_owned_;
  const size_t bytes = sizeof(double) * width_;
  std::fill(rows_.begin(), rows_.begin() + static_cast<size_t>(nall_) * width_, 0.0);
  if (ghosts > 0) {   // one counted read of the ghost rows' gradients
    const auto g = uma::to_host(grad.narrow(0, n_owned_, ghosts).reshape({ghosts, width_}).to(torch::kFloat64));
    const double* src = g.data_ptr<double>();   // host data
    for (int64_t k = 0; k < ghosts; ++k) std::memcpy(row((*index_)[n_owned_ + k]), src + k * width_, bytes);
  }
  reverse_comm(width_);
  torch::Tensor owned = grad.narrow(0, 0, n_owned_);
  if (n_owned_ > 0) {   // one counted upload of what the owners received
    auto host = torch::empty({n_owned_, width_}, torch::kFloat64);
    double* dst = host.data_ptr<double>();   // host data
    for (int k = 0; k < n_owned_; ++k) std::memcpy(dst + static_cast<size_t>(k) * width_, row((*index_)[k]), bytes);
    owned = owned + uma::upload(host, grad.options()).view(rows_like(grad, n_owned_));
  }
  return torch::cat({owned, torch::zeros(rows_like(grad, ghosts), grad.options()), grad.narrow(0, n, N - n)});
}

int HaloExchange::pack_forward(int n, const int* list, double* buf) {
  for (int i = 0; i < n; ++i) std::memcpy(buf + static_cast<size_t>(i) * width_, row(list[i]), sizeof(double) * width_);
  rows_packed_ += n;
  return n * width_;
}

void HaloExchange::unpack_forward(int n, int first, const double* buf) {
  std::memcpy(row(first), buf, sizeof(double) * width_ * n);
}

int HaloExchange::pack_reverse(int n, int first, double* buf) {
  std::memcpy(buf, row(first), sizeof(double) * width_ * n);
  rows_packed_ += n;
  return n * width_;
}

void HaloExchange::unpack_reverse(int n, const int* list, const double* buf) {
  for (int i = 0; i < n; ++i) {
    double* r = row(list[i]);
    const double* b = buf + static_cast<size_t>(i) * width_;
    for (int d = 0; d < width_; ++d) r[d] += b[d];
  }
}
