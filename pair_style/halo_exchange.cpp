#include "halo_exchange.h"

#include <algorithm>
#include <cstring>

#include "api/uma.h"

using namespace LAMMPS_NS;

namespace {

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

void HaloExchange::resize(const torch::Tensor& x) {
  width_ = static_cast<int>(x.numel() / std::max<int64_t>(x.size(0), 1));
  fp64_ = x.scalar_type() == torch::kFloat64;
  value_bytes_ = fp64_ ? sizeof(double) : sizeof(float);
  slots_ = static_cast<int>((width_ * value_bytes_ + sizeof(double) - 1) / sizeof(double));
  const size_t need = static_cast<size_t>(nall_) * slots_;
  if (rows_.size() < need) rows_.resize(need);
}

// Rows [first, first + count) of the engine's rows k -> LAMMPS rows index[k]:
// host tensor -> buffer, and back.
void HaloExchange::to_buffer(const torch::Tensor& host, int first) {
  const char* src = static_cast<const char*>(host.data_ptr());  // host data
  const size_t bytes = static_cast<size_t>(width_) * value_bytes_;
  for (int64_t k = 0; k < host.size(0); ++k)
    std::memcpy(row((*index_)[first + k]), src + k * bytes, bytes);
}

torch::Tensor HaloExchange::from_buffer(int first, int64_t count,
                                        const torch::TensorOptions& options) {
  auto host = torch::empty({count, width_}, options.device(torch::kCPU));
  char* dst = static_cast<char*>(host.data_ptr());  // host data
  const size_t bytes = static_cast<size_t>(width_) * value_bytes_;
  for (int64_t k = 0; k < count; ++k)
    std::memcpy(dst + k * bytes, row((*index_)[first + k]), bytes);
  return host;
}

torch::Tensor HaloExchange::owners_to_ghosts(const torch::Tensor& x) {
  const int64_t N = x.size(0), n = static_cast<int64_t>(index_->size()), ghosts = n - n_owned_;
  resize(x);
  if (n_owned_ > 0)
    to_buffer(uma::to_host(x.narrow(0, 0, n_owned_).reshape({n_owned_, width_})), 0);  // one read
  forward_comm(slots_);
  torch::Tensor ghost_rows = x.narrow(0, n_owned_, 0);
  if (ghosts > 0)  // one upload
    ghost_rows = uma::upload(from_buffer(n_owned_, ghosts, x.options()), x.options())
                     .view(rows_like(x, ghosts));
  return torch::cat({x.narrow(0, 0, n_owned_), ghost_rows, x.narrow(0, n, N - n)});
}

torch::Tensor HaloExchange::ghosts_to_owners(const torch::Tensor& grad) {
  const int64_t N = grad.size(0), n = static_cast<int64_t>(index_->size()), ghosts = n - n_owned_;
  resize(grad);
  std::fill(rows_.begin(), rows_.begin() + static_cast<size_t>(nall_) * slots_, 0.0);
  if (ghosts > 0)  // one read
    to_buffer(uma::to_host(grad.narrow(0, n_owned_, ghosts).reshape({ghosts, width_})), n_owned_);
  reverse_comm(slots_);
  torch::Tensor owned = grad.narrow(0, 0, n_owned_);
  if (n_owned_ > 0)  // one upload of what the owners received
    owned = owned + uma::upload(from_buffer(0, n_owned_, grad.options()), grad.options())
                        .view(rows_like(grad, n_owned_));
  return torch::cat(
      {owned, torch::zeros(rows_like(grad, ghosts), grad.options()), grad.narrow(0, n, N - n)});
}

int HaloExchange::pack_forward(int n, const int* list, double* buf) {
  const size_t bytes = static_cast<size_t>(width_) * value_bytes_;
  for (int i = 0; i < n; ++i)
    std::memcpy(buf + static_cast<size_t>(i) * slots_, row(list[i]), bytes);
  rows_packed_ += n;
  return n * slots_;
}

void HaloExchange::unpack_forward(int n, int first, const double* buf) {
  std::memcpy(row(first), buf, sizeof(double) * slots_ * n);
}

int HaloExchange::pack_reverse(int n, int first, double* buf) {
  std::memcpy(buf, row(first), sizeof(double) * slots_ * n);
  rows_packed_ += n;
  return n * slots_;
}

namespace {
template <typename T>
void add_rows(int n, const int* list, const double* buf, double* rows, int width, int slots) {
  for (int i = 0; i < n; ++i) {
    T* r = reinterpret_cast<T*>(rows + static_cast<size_t>(list[i]) * slots);
    const T* b = reinterpret_cast<const T*>(buf + static_cast<size_t>(i) * slots);
    for (int d = 0; d < width; ++d) r[d] += b[d];
  }
}
}  // namespace

void HaloExchange::unpack_reverse(int n, const int* list, const double* buf) {
  if (fp64_)
    add_rows<double>(n, list, buf, rows_.data(), width_, slots_);
  else
    add_rows<float>(n, list, buf, rows_.data(), width_, slots_);
}
