#include "label_gate.h"

#include <cstdio>
#include <stdexcept>

#include "utils.h"

#include "api/uma.h"

using namespace LAMMPS_NS;

std::string LabelGate::decide(long long step, double max, double mean) {
  counts_.max = max;
  counts_.mean = mean;
  ++counts_.checks;
  if (!auto_) return {};
  const long long since = step - last_label_;
  const bool forced = max_interval_ > 0 && since >= max_interval_;
  const bool unsure = max > threshold_ && since >= min_interval_;
  if (!forced && !unsure) return {};
  ++counts_.gated;
  if (unsure) return fmt::format("uncertainty {:.4g} eV > {} eV", max, threshold_);
  return fmt::format("{} steps since the last label (max_interval; uncertainty {:.4g} eV)", since,
                     max);
}

LabelGate::Counts LabelGate::take_counts() {
  Counts c = counts_;
  counts_.checks = counts_.gated = 0;
  return c;
}

double calibration::report(const std::vector<Frame> &frames, long long step,
                           const std::string &file, bool append) {
  std::vector<double> u_max, force_mae;
  for (const auto &f : frames) {
    u_max.push_back(f.uncertainty_max);
    force_mae.push_back(f.force_mae);
  }
  const double rho = uma::train::rank_correlation(u_max, force_mae);
  if (file.empty()) return rho;
  FILE *fp = fopen(file.c_str(), append ? "a" : "w");
  if (!fp)
    throw std::runtime_error(
        fmt::format("cannot write calibration file {}: {}", file, utils::getsyserror()));
  if (!append)
    fputs(
        "# step frame atoms uncertainty_max_eV uncertainty_mean_eV force_mae_eV_A "
        "energy_mae_eV_atom\n",
        fp);
  for (size_t k = 0; k < frames.size(); ++k)
    fputs(fmt::format("{} {} {} {:.10g} {:.10g} {:.10g} {:.10g}\n", step, k, frames[k].atoms,
                      frames[k].uncertainty_max, frames[k].uncertainty_mean, frames[k].force_mae,
                      frames[k].energy_mae)
              .c_str(),
          fp);
  fclose(fp);
  return rho;
}
