// The per-block halo exchange of pair_style uma on several MPI ranks.
//
// Each rank evaluates its owned atoms plus the ghosts within one cutoff.
// Messages go into owned atoms only, so after the edge-degree embedding and
// after every block but the last a ghost's node-feature row is stale: apply()
// replaces every ghost row with its owner's current row, through LAMMPS's
// own forward communication (which follows periodic images, any processor
// grid and subdomains thinner than the cutoff).  Its gradient is the reverse
// communication: the gradient that reached a ghost's row is added into its
// owner's row.  The engine differentiates through both (the forces, virials
// and per-atom quantities stay exact) and calls them from LAMMPS's thread
// between its autograd passes, never from inside one (staged_backward.h), so
// every MPI call stays on the thread that called compute().
//
// The rows travel, in the model's precision, through a host buffer indexed
// by LAMMPS's local atom index (owned and ghost, mapped or not), so ghosts
// that LAMMPS forwards from rank to rank (thin subdomains) carry their rows
// even when they are not in this rank's graph.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/torch.h>

#include "api/uma.h"
#include "reverse_rows.h"

namespace LAMMPS_NS {

class HaloExchange final : public ReverseRows {
 public:
  // The communication calls of the pair style: comm->forward_comm(pair, width)
  // and comm->reverse_comm(pair, width), whose pack/unpack callbacks come
  // back to the functions below.
  std::function<void(int)> forward_comm, reverse_comm;

  // This step's atoms: engine row k is LAMMPS local atom index[k]; rows
  // [0, n_owned) are owned.  nall = nlocal + nghost.
  void set_atoms(const std::vector<int>* index, int n_owned, int nall);

  // Bytes of one row of the latest exchange: 9 x sphere channels values of
  // the model's precision (float32 rows travel two values per double).
  int64_t row_bytes() const { return static_cast<int64_t>(width_) * value_bytes_; }
  // Rows packed (sent to other ranks or copied to this rank's own periodic
  // images) since the last reset, forward and reverse together.
  int64_t rows_packed() const { return rows_packed_; }
  void reset_counts() { rows_packed_ = 0; }

  // LAMMPS communication callbacks (Pair::pack_forward_comm, ...).
  int pack_forward(int n, const int* list, double* buf);
  void unpack_forward(int n, int first, const double* buf);
  int pack_reverse(int n, int first, double* buf) override;
  void unpack_reverse(int n, const int* list, const double* buf) override;

  // The two directions (uma::Piece::GhostExchange), collectives over
  // all ranks: x [N, 9, C] node features (N >= index.size(): extra
  // placeholder rows pass through) -> the same with every ghost row replaced
  // by its owner's row; and a gradient of that shape -> each ghost row added
  // into its owner's row, ghost rows zero.
  torch::Tensor owners_to_ghosts(const torch::Tensor& x);
  torch::Tensor ghosts_to_owners(const torch::Tensor& grad);
  uma::Piece::GhostExchange functions() {
    return {[this](const torch::Tensor& x) { return owners_to_ghosts(x); },
            [this](const torch::Tensor& g) { return ghosts_to_owners(g); }};
  }

  double memory_usage() const { return static_cast<double>(rows_.capacity()) * sizeof(double); }

 private:
  void* row(int i) { return rows_.data() + static_cast<size_t>(i) * slots_; }
  void resize(const torch::Tensor& like);  // row layout of `like` [N, ...], buffer for nall rows
  void to_buffer(const torch::Tensor& host, int first);
  torch::Tensor from_buffer(int first, int64_t count, const torch::TensorOptions& options);

  const std::vector<int>* index_ = nullptr;
  int n_owned_ = 0, nall_ = 0;
  int width_ = 0;      // values per row
  bool fp64_ = false;  // values are doubles (else floats)
  size_t value_bytes_ = sizeof(double);
  int slots_ = 0;             // doubles a row occupies in the buffer and in LAMMPS's messages
  std::vector<double> rows_;  // [nall, slots] feature (or gradient) rows, in the model's precision
  int64_t rows_packed_ = 0;
};

}  // namespace LAMMPS_NS
