// pair_style uma: fairchem's UMA-S universal potential through the lammps-uma
// engine.  Energies, conserving forces, global and per-atom virials.
//
// One MPI rank evaluates its owned atoms as one periodic system.  Several
// ranks each evaluate their owned atoms plus the ghosts within one cutoff
// (LAMMPS's usual cutoff + skin shell), and refresh the ghosts' node features
// from their owners after every block (halo_exchange.h).  The forces and
// virials that land on ghost atoms are folded back onto their owners by this
// style's own reverse communication (so newton on and off give the same
// numbers).  The keyword `ghosts deep` selects another scheme, a ghost
// shell of (layers + 1) x cutoff evaluated without exchange: a reference
// for tests and benchmarks.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pair.h"
#include "transfer_stats.h"
#include "uma_model_handle.h"

namespace uma {
class Engine;
class UmaModel;
struct Atoms;
struct HostEvaluation;
struct Request;
}  // namespace uma

namespace LAMMPS_NS {

class GhostFold;
class HaloExchange;
class InPlaceEvaluation;
class ReverseRows;

// (This header includes no LibTorch header: uma/kk's source, which nvcc
// compiles for a CUDA Kokkos, includes it.)
class PairUMA : public Pair, public UMAModelHandle {
 public:
  PairUMA(class LAMMPS *);
  ~PairUMA() override;

  void compute(int, int) override;
  void settings(int, char **) override;
  void coeff(int, char **) override;
  void init_style() override;
  double init_one(int, int) override;
  double memory_usage() override;
  void finish() override;  // the run's peak GPU memory, in the log

  // UMAModelHandle, for fix uma/train (both create the engine first).
  Setup training_setup() override;
  void set_weights(const std::function<void(uma::UmaModel &)> &copy) override;
  bool read_trained_weights(const std::function<void(const uma::UmaModel &)> &read) override;
  bool holds_trained_weights() const override { return trained_; }

  int pack_forward_comm(int, int *, double *, int, int *) override;
  void unpack_forward_comm(int, int, double *) override;
  int pack_reverse_comm(int, int, double *) override;
  void unpack_reverse_comm(int, int *, double *) override;

 protected:
  std::string style_name_ = "uma";  // in log lines (uma/kk for the KOKKOS variant)

  // settings
  std::shared_ptr<uma::UmaModel> coeff_model_;  // read by pair_coeff, until the engine takes it
  std::string task_given_;                      // the task keyword's (empty: the model's only task)
  std::string task_;            // the task of the loaded model, resolved from task_given_
  int charge_ = 0, spin_ = -1;  // spin -1: the task's default (resolved with the task)
  bool charge_set_ = false, spin_set_ = false;
  std::string precision_ = "fp32";
  std::string device_ = "auto";
  double memory_gb_ = 0.0;   // 0: automatic (memory_plan.h)
  bool cuda_graph_ = false;  // replay a CUDA graph of the step (one rank, CUDA)
  std::string graph_refusal_logged_;
  int memory_sharers_ = 1;  // ranks of this node sharing the device's memory
  bool plan_logged_ = false, plan_logged_recompute_ = false;
  double run_start_device_bytes_ = 0;  // what LibTorch held on the GPU when the run began

  // coefficients
  std::string model_path_;
  std::vector<int> type_z_;        // atomic number per type (index 1..ntypes), 0 for NULL
  std::vector<int> engine_index_;  // engine atom -> local LAMMPS index, this step
  std::unique_ptr<uma::Engine> engine_;
  double cutoff_ = 0.0;
  int layers_ = 0;
  int feature_width_ = 0;  // doubles per node-feature row: (lmax + 1)^2 x sphere channels
  long long merges_logged_ = 0;
  int remerges_logged_ = 0;       // re-merge lines logged so far (the first few are)
  bool weights_updated_ = false;  // the next merge follows new weights, not a new composition
  // Weights a fix set since pair_coeff read the file; kept across new settings.
  bool trained_ = false;
  std::shared_ptr<uma::UmaModel> kept_model_;  // trained weights, until the new engine takes them
  double user_cutghost_ =
      -1.0;  // comm->cutghostuser before this style raised it (-1: never raised)

  TransferStats transfers_;          // behind compute pair (transfer_stats.h)
  std::unique_ptr<GhostFold> fold_;  // several ranks: ghost forces and virials on their way home

  // several ranks: the halo exchange, or the deep ghost shell (ghosts deep)
  std::unique_ptr<HaloExchange> halo_;
  bool deep_shell_ = false;
  ReverseRows *reverse_rows_ = nullptr;  // what the reverse communication under way moves

  // uma/kk's evaluation on its Kokkos views (in_place_evaluation.h)
  friend class InPlaceEvaluation;

  void allocate();
  void create_engine();
  std::string device_name();
  // The device the engine runs on, in LibTorch's words ("cpu", "cuda:0").
  std::string engine_device() const;
  // The GPU the atoms' data lives on (uma/kk under a CUDA Kokkos), or -1: the
  // node-local rank picks one.
  virtual int data_gpu() const { return -1; }
  void log_memory_plan();
  void log_cuda_graph();
  uma::Request read_request() const;  // what this step's flags ask the engine for
  // The evaluation of one step on one rank (the whole periodic system) or on
  // several (owned atoms plus ghosts); the Kokkos style overrides both.
  virtual void compute_whole(int eflag, int vflag);
  virtual void compute_local(int eflag, int vflag);
  // The whole system's box as the engine's periodic cell (lattice vectors
  // from boxlo), and the script's charge, spin and task.
  void set_whole_system(uma::Atoms &a) const;
  // A piece's charge, spin and task, and the sum over ranks of the charge and
  // spin channels if the model balances them.
  void set_piece_inputs(uma::Atoms &local) const;
  // Adds the energy and virials LAMMPS asked for: per-atom energies of
  // engine rows [0, n_energy), per-atom virials of rows [0, n_virial).
  void tally(const uma::HostEvaluation &r, int n_energy, int n_virial);
  // The lower corner of this rank's subdomain (box coordinates): the origin
  // of the coordinates a rank hands the engine (float32 keeps 7 digits).
  void subdomain_corner(double *origin) const;
  // LAMMPS's communication with this style's host callbacks, whatever
  // execution space a Kokkos variant declares: the halo exchange's rows
  // (forward), and the reverse communication of `rows`.
  void forward_comm_host(int width);
  void reverse_comm_host(ReverseRows &rows, int width);
  // Runs one exchange of width values per atom through LAMMPS's host
  // callbacks (per_atom: comm_forward or comm_reverse, restored after).
  template <typename Exchange> void exchange_on_host(int &per_atom, int width, Exchange exchange);
  std::string describe(const std::exception &e) const;
  std::vector<long long> global_composition(const std::vector<int64_t> &numbers, int nowned) const;
  std::vector<long long> sum_over_ranks(std::vector<long long> counts) const;
};

}  // namespace LAMMPS_NS
