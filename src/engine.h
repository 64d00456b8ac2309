// The evaluation engine: model + on-device graph + merged-MoLE cache.
//
// evaluate() leaves everything on the model's device.  In the steady state
// (same atoms, charge, spin, task and periodicity; positions and cells may
// change) it makes no counted host read and one counted upload: positions
// and cells, packed into one staging buffer.  Everything that depends only
// on the layout (atomic numbers, normalisers, graph constants) stays on the
// device until the layout changes.  fetch() is the one packed read per step:
// the graph's status plus the results the caller asks for.
// evaluate_checked() is the convenience for callers that want everything on
// the host: it repeats the step while the edge capacity overflows.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "cuda_graph.h"
#include "memory_plan.h"
#include "model.h"
#include "radius_graph.h"
#include "replay_cache.h"
#include "staged_backward.h"
#include "transfers.h"
#include "uma_error.h"

namespace uma {

struct Geometry;   // batch.h

// Periodic cells whose lattice planes lie closer than this (Angstrom) along a
// periodic direction are refused: a 0.5 A spacing already means 25 images per
// direction within a 6 A cutoff.
constexpr double kMinPlaneSpacing = 0.5;

// For callers whose atoms already live on the model's device (pair_style
// uma/kk wraps LAMMPS's Kokkos views): the atomic numbers as a device tensor
// instead of a host vector, and positions used where they are (no staging
// copy; they must be on the model's device, float64).  The caller names its
// layout (atoms, their order and numbers) with `layout_id`; the engine builds
// its per-layout constants (one counted read and two uploads) only when the
// id changes, so the caller must change it whenever the numbers may have.
struct DeviceAtoms {
  torch::Tensor numbers;          // [n] int64 on the model's device; undefined: not used
  int64_t layout_id = -1;
  // Subtracted from the positions (float64, on the device) before anything
  // else: keeps float32 models accurate far from the origin.
  std::array<double, 3> origin{0.0, 0.0, 0.0};
  bool defined() const { return numbers.defined(); }
};

// One system, as the caller holds it on the host.
struct Atoms {
  std::vector<int64_t> numbers;   // atomic numbers
  torch::Tensor positions;        // [N, 3] Angstrom (any device/dtype)
  Matrix3 cell{};                 // rows are lattice vectors
  std::array<bool, 3> pbc{false, false, false};
  int64_t charge = 0;
  int64_t spin = 0;               // spin multiplicity (omol); 0 elsewhere
  std::string task;               // dataset head, e.g. "omat"
  DeviceAtoms on_device;          // set: the atoms live on the model's device (see DeviceAtoms)
};

// A precision by the name users give it: "fp32", "fp64", or "tf32" (float32
// with TF32 matrix products on CUDA).  The one place such names are mapped.
struct Precision {
  torch::ScalarType dtype = torch::kFloat32;
  bool tf32 = false;
};
// Throws uma::Error naming the accepted names for any other.
Precision parse_precision(const std::string& name);

struct EngineOptions {
  torch::Device device = torch::kCPU;
  torch::ScalarType dtype = torch::kFloat32;
  // float32 matrix products on TF32 tensor cores (CUDA only; a process-wide
  // LibTorch setting).  Documented deviation: doc/benchmarks.md.
  bool tf32 = false;
  void set_precision(const Precision& p) {
    dtype = p.dtype;
    tf32 = p.tf32;
  }
  bool merge_mole = true;   // merge experts once per composition/charge/spin/task
  bool stress = true;
  bool atom_virial = false;  // per-atom virials (each edge's r (x) f split half/half)
  // Ask glibc to keep freed memory for reuse (mallopt: no mmap'd blocks, no
  // trimming).  Large per-step tensors are then recycled instead of being
  // mapped, page-faulted and unmapped every evaluation, which on CPUs halves
  // the step time of big systems.  Process-wide; the environment variable
  // UMA_KEEP_MEMORY=0 turns it off.
  bool keep_host_memory = true;
  // Memory budget of one evaluation in bytes (memory_plan.h).  0: 80% of the
  // memory available on the device when the engine is made, divided by
  // memory_sharers (processes on this node sharing that memory).
  double memory_budget = 0;
  int memory_sharers = 1;
  // -1: the memory plan picks the stored or the recomputed path; 0: always
  // stored; > 0: always recomputed in chunks of this many edges.
  int64_t recompute_chunk = -1;
  // The blocks' edge work (nn/edge_backend.h): kLean runs the fused CPU
  // operators on the CPU and the reference composition elsewhere; kReference
  // runs the composition everywhere.
  enum class EdgeOps { kLean, kReference };
  EdgeOps edge_ops = EdgeOps::kLean;
  // Whole-system evaluations (evaluate()) on a CUDA device replay a CUDA
  // graph of the step once its key has held for two steps (replay_cache.h):
  // positions and cells are copied into the graph's inputs, and the results
  // are the graph's outputs, overwritten by the next evaluation.  Needs a
  // CUDA device and a build with the CUDA headers (the constructor refuses
  // otherwise).  A step that cannot be captured runs eager (graph_refusal()).
  // Local pieces (evaluate_local) always run eager: their collectives run
  // between the autograd passes.
  bool cuda_graph = false;
  // Captures kept at once (least recently used dropped first); together
  // they hold at most half the memory budget, the one in use always kept.
  int cuda_graph_cache = 4;
};

// One process's share of one system decomposed in space, as LAMMPS holds it:
// owned atoms first, then ghost atoms (real-space images of other atoms), no
// periodicity.  The energy is the sum over the owned atoms; summing energy,
// forces (ghost rows folded onto their owners) and virials over all
// processes gives the whole system's.  The ghosts must cover either
//  - one cutoff around the owned atoms, with exchange_ghosts set (the halo
//    exchange: messages go into owned atoms only, and the ghosts' node
//    features are refreshed from their owners after every block), or
//  - (layers + 1) x cutoff, without it (every atom whose features reach an
//    owned atom is computed here; n_targets and layer_targets prune that).
struct LocalAtoms {
  std::vector<int64_t> numbers;      // [n_owned + n_ghost] atomic numbers
  torch::Tensor positions;           // [n_owned + n_ghost, 3] Angstrom
  int64_t n_owned = 0;
  // Atoms [0, n_targets) receive messages; the rest (ghosts farther than
  // layers x cutoff from every owned atom) only send them.  -1: all receive.
  int64_t n_targets = -1;
  // Block k (0-based) sends messages only into atoms [0, layer_targets[k]),
  // those whose features still reach an owned atom (ordered by hops from the
  // owned atoms).  Empty: into all n_targets.
  std::vector<int64_t> layer_targets;
  std::vector<int64_t> composition;  // atoms of each atomic number in the whole system
  int64_t charge = 0;
  int64_t spin = 0;
  std::string task;
  // Sum over all processes of a small tensor (a collective); needed by
  // models that balance charge/spin channels.  Unset: this process holds
  // everything.  The engine differentiates through it (the gradient of the
  // sum is the sum of the gradients) and calls it only from the thread that
  // called evaluate_local(), never from inside an autograd pass.
  std::function<torch::Tensor(const torch::Tensor&)> sum_over_processes;
  // Halo exchange of node features [N, 9, C] (N = n_owned + ghosts; a
  // process without atoms gets one placeholder row).  Both directions are
  // collectives, called the same number of times on every process (once per
  // block each), from the thread that called evaluate_local() and never from
  // inside an autograd pass (staged_backward.h); neither needs autograd.
  // Requires n_targets = n_owned (or -1) and no layer_targets.
  struct GhostExchange {
    // The rows with every ghost row replaced by its owner's current row.
    std::function<torch::Tensor(const torch::Tensor&)> owners_to_ghosts;
    // Gradient rows with each ghost row's gradient added into its owner's
    // row, and the ghost rows zero.
    std::function<torch::Tensor(const torch::Tensor&)> ghosts_to_owners;
    explicit operator bool() const { return static_cast<bool>(owners_to_ghosts); }
  } exchange_ghosts;
  // Set: the atoms live on the model's device (numbers stays empty; the
  // composition must still be given).
  DeviceAtoms on_device;
};

// Atoms of a system or piece, whichever way they were given.
int64_t atom_count(const Atoms& a);
int64_t atom_count(const LocalAtoms& piece);

// Device tensors; energies in eV (float64), forces eV/A, stress eV/A^3
// (+ (1/V) dE/d strain; NaN for systems with a zero-volume cell), virials in
// eV with LAMMPS's sign (W = sum r (x) f = -V stress).
struct Evaluation {
  torch::Tensor energy;        // [B] float64
  torch::Tensor atom_energy;   // [N] float64, sums to energy (ghosts: 0)
  torch::Tensor forces;        // [N, 3]
  torch::Tensor stress;        // [B, 3, 3] or undefined (local evaluations: undefined)
  torch::Tensor virial;        // [B, 3, 3] float64, or undefined
  torch::Tensor atom_virial;   // [N, 3, 3] float64 if options.atom_virial
  torch::Tensor edge_counts;   // [B] edges found (the graph holds min(count, capacity))
  torch::Tensor close_atoms;   // [4] float64: RadiusGraph::close_atoms
  torch::Tensor nonfinite;     // [] non-finite position values (positions given on the device)
  torch::Tensor graph_sizes;   // [3B] RadiusGraph::sizes, read only to grow capacities after an overflow
  std::vector<int64_t> capacities;
};

// What fetch() copies to the host besides the graph's status.
struct ReadRequest {
  bool energy = true;
  bool forces = true;
  bool atom_energy = false;
  bool stress = false;
  bool virial = false;
  bool atom_virial = false;
  static ReadRequest all() { return {true, true, true, true, true, true}; }
};

// Host copies; fields that were not requested (or not computed) are empty.
struct HostEvaluation {
  std::vector<double> energy;
  torch::Tensor atom_energy;   // [N] float64, CPU
  torch::Tensor forces;        // [N, 3] float64, CPU
  torch::Tensor stress;        // [B, 3, 3] float64, CPU, or undefined
  torch::Tensor virial;        // [B, 3, 3] float64, CPU, or undefined
  torch::Tensor atom_virial;   // [N, 3, 3] float64, CPU, or undefined
  std::vector<int64_t> edges;  // per system
};

class Engine {
 public:
  Engine(UmaModel model, EngineOptions options = {});
  ~Engine();

  Evaluation evaluate(const std::vector<Atoms>& systems);
  HostEvaluation evaluate_checked(const std::vector<Atoms>& systems);
  // One process's share of a decomposed system (B = 1 in the results).
  // Validates the piece first (validate_local) and throws before any
  // collective if it is bad.
  Evaluation evaluate_local(const LocalAtoms& piece);

  // One packed, counted host read: the graph's status and what `what` asks
  // for.  Returns false, after growing the edge capacities, if a system
  // overflowed them: the step must then be repeated (`out` is left alone).
  // Throws uma::Error on non-finite positions, uma::CloseAtomsError on two
  // atoms closer than kMinAtomDistance.
  bool fetch(const Evaluation& ev, const ReadRequest& what, HostEvaluation& out);

  const UmaModel& model() const { return model_; }
  const EngineOptions& options() const { return options_; }
  void request_atom_virial(bool on) { options_.atom_virial = on; }
  // Lets `copy` overwrite the model's weights (a trainer's); the experts are
  // merged again at the next evaluation.
  void update_weights(const std::function<void(UmaModel&)>& copy);
  int64_t merge_count() const { return merges_; }
  // The memory plan of the latest evaluation; plan_count() grows each time
  // it is made again (new atom count or edge capacity).
  const MemoryPlan& memory_plan() const { return plan_; }
  int64_t plan_count() const { return plans_; }
  // CUDA-graph replay (EngineOptions::cuda_graph): captures made, replays
  // done, captures held now and their device memory in bytes, captures
  // dropped for the cache's limits, and why the latest capture failed
  // (empty: none did).
  int64_t graph_captures() const { return replays_.captures(); }
  int64_t graph_replays() const { return replays_.replays(); }
  int64_t graph_held() const { return static_cast<int64_t>(replays_.held()); }
  double graph_held_bytes() const { return replays_.held_bytes(); }
  const std::string& graph_refusal() const { return replays_.last_refusal(); }
  // The backend of the blocks' edge work, chosen when the engine is made.
  const nn::EdgeBackend& edge_backend() const { return *edge_backend_; }
  double memory_budget() const { return budget_; }
  const std::vector<int64_t>& edge_capacities() const { return graph_.capacities(); }

  // Throws uma::Error describing the first problem with the input.
  void validate(const std::vector<Atoms>& systems) const;
  // The same for a piece, host positions included (NaN or infinite values);
  // it calls no collective, so processes can agree on its outcome before
  // evaluate_local() enters the model's collectives.
  void validate_local(const LocalAtoms& piece) const;

 private:
  // Device constants of one layout (atoms, charge, spin, task, periodicity).
  struct Layout;
  const Layout& whole_layout(const std::vector<Atoms>& systems);
  const Layout& local_layout(const LocalAtoms& piece, int64_t N);
  // The layout of atoms given on the device (DeviceAtoms): `counts` per
  // atomic number of the whole system; of a piece's N atoms the first
  // `n_owned` own energy (-1: a whole system, which owns all).
  std::shared_ptr<Layout> device_layout(const DeviceAtoms& atoms, int64_t N, int64_t n_owned,
                                        const std::vector<int64_t>& counts, int64_t charge, int64_t spin,
                                        const std::string& task);
  // The model's collectives for a piece: piece's sum and exchange, cut out
  // of the autograd graph (stages_).
  void connect_collectives(BatchTensors& in, const LocalAtoms& piece);
  nn::MoleContext mole_context(const Layout& layout, const torch::Tensor& system_emb,
                               const std::vector<int64_t>& edge_rows);
  std::vector<int64_t> mole_key(const std::vector<int64_t>& counts, int64_t charge, int64_t spin,
                                const std::string& task) const;
  // Graph, model and gradients with respect to the edge vectors.
  Evaluation run(const Layout& layout, const Geometry& geo);
  // run(), or its CUDA graph (EngineOptions::cuda_graph).
  Evaluation run_or_replay(const Layout& layout, const Geometry& geo);
  // What a capture of this step depends on besides the positions and cells:
  // the part shared by all captures that never returns once it changes
  // (layouts, merges, plans and capacities made so far), and the part that
  // may alternate (per-atom virials, the graph's bin plan).
  std::vector<int64_t> replay_epoch() const;
  std::vector<int64_t> replay_key(const Geometry& geo) const;
  struct Replay;   // a captured step: its inputs, outputs, graph and the tables it reads
  // Sums rows of `x` into B systems whose rows are contiguous blocks of the
  // given host lengths: deterministic on every device (no atomics).
  torch::Tensor system_sum(const torch::Tensor& x, const std::vector<int64_t>& offsets,
                           const torch::Tensor& lengths) const;

  UmaModel model_;
  EngineOptions options_;
  RadiusGraphBuilder graph_;
  std::shared_ptr<Layout> layout_;
  int64_t layouts_ = 0;   // layouts made: a new one changes the replay key
  ReplayCache<Replay> replays_;
  StagingBuffer staging_;
  StagedBackward stages_;   // this evaluation's collectives (local pieces)
  std::vector<int64_t> edge_block_offsets_;   // edge blocks the cached lengths belong to
  torch::Tensor edge_block_lengths_;
  std::vector<int64_t> merged_key_;
  bool merged_ = false;
  int64_t merges_ = 0;
  const nn::EdgeBackend* edge_backend_ = nullptr;
  MemoryModel memory_model_;
  double budget_ = 0;
  MemoryPlan plan_;
  int64_t plans_ = 0;
};

// Throws uma::Error describing the first problem with the input.
void validate_systems(const UmaModel& model, const std::vector<Atoms>& systems);

// Whether a task reads the total charge and spin multiplicity (omol).
bool takes_charge_spin(const std::string& task);
// Default spin for a task: 1 (singlet) for the tasks that take spin, else 0.
int64_t default_spin(const std::string& task);
// Throws uma::Error if the charge or the spin multiplicity is outside the
// range the model's embeddings cover (-100..100, 0..100).
void validate_charge_spin(int64_t charge, int64_t spin);

// The one capacity policy of the neighbour graph, used by the pair styles,
// their agreement over ranks and the trainer: an evaluation whose graph
// overflowed its capacity grows the capacity (to what the build found, with
// headroom) and runs again, at most this many times in all.  A graph that
// still overflows is an error, never a truncated result.
constexpr int kCapacityAttempts = 4;

// The error after kCapacityAttempts overflowing builds.
Error capacity_exhausted();

// Calls `attempt` (one graph build, its evaluation and the read that tells
// whether the graph fitted; false after it grew the capacity) until it
// returns true; throws capacity_exhausted() if it never does.
template <class Attempt>
void until_capacity_fits(Attempt&& attempt) {
  for (int i = 0; i < kCapacityAttempts; ++i)
    if (attempt()) return;
  throw capacity_exhausted();
}

}  // namespace uma
