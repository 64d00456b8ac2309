#include "transfer_stats.h"

#include "api/uma.h"

namespace LAMMPS_NS {

void TransferStats::begin_step() {
  reads_ = uma::host_read_count();
  uploads_ = uma::upload_count();
  read_bytes_ = uma::host_read_bytes();
  upload_bytes_ = uma::upload_bytes();
}

void TransferStats::end_step(double *pvector) const {
  pvector[kStepReads] = static_cast<double>(uma::host_read_count() - reads_);
  pvector[kStepUploads] = static_cast<double>(uma::upload_count() - uploads_);
  pvector[kRunReads] += pvector[kStepReads];
  pvector[kRunUploads] += pvector[kStepUploads];
  pvector[kStepReadBytes] = static_cast<double>(uma::host_read_bytes() - read_bytes_);
  pvector[kStepUploadBytes] = static_cast<double>(uma::upload_bytes() - upload_bytes_);
}

}  // namespace LAMMPS_NS
