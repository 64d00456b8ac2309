// The values `compute pair uma` reports (Pair::pvector): the host traffic of
// the latest step and of the run, and the halo exchange's share.
#pragma once

namespace LAMMPS_NS {

// Indices into pvector (compute pair's c_ID[k] is index k - 1).
enum PairValue : int {
  kStepReads = 0,    // counted host reads in the latest step
  kStepUploads,      // counted uploads in the latest step
  kRunReads,         // host reads since the run began
  kRunUploads,       // uploads since the run began
  kGhostAtoms,       // ghost atoms in the latest step's graph (several ranks)
  kHaloBytes,        // bytes the halo exchange packed in the latest step
  kStepReadBytes,    // bytes read to the host in the latest step
  kStepUploadBytes,  // bytes uploaded in the latest step
  kPairValues        // how many
};

// The engine's transfer counters around one compute().
class TransferStats {
 public:
  void begin_step();
  // Writes the step's counts into pvector and adds them to the run's totals.
  void end_step(double *pvector) const;

 private:
  long long reads_ = 0, uploads_ = 0, read_bytes_ = 0, upload_bytes_ = 0;
};

}  // namespace LAMMPS_NS
