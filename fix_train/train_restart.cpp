#include "train_restart.h"

#include <cstring>

using namespace LAMMPS_NS;

namespace {

constexpr double kFormat =
    -2;  // first value of the list (older files start with a step count >= 0)
constexpr double TrainRestart::*kFields[] = {
    &TrainRestart::steps,          &TrainRestart::epoch,  &TrainRestart::position,
    &TrainRestart::calls,          &TrainRestart::frames, &TrainRestart::last_label_step,
    &TrainRestart::planned_samples};
constexpr int kFieldCount = sizeof(kFields) / sizeof(kFields[0]);
constexpr int kOldFieldCount = 4;  // files without the marker: steps, epoch, position, calls

}  // namespace

std::vector<double> TrainRestart::pack() const {
  std::vector<double> list{kFormat};
  for (auto field : kFields) list.push_back(this->*field);
  return list;
}

void TrainRestart::write(FILE *fp) const {
  const auto list = pack();
  const int size = static_cast<int>(list.size() * sizeof(double));
  fwrite(&size, sizeof(int), 1, fp);
  fwrite(list.data(), sizeof(double), list.size(), fp);
}

TrainRestart TrainRestart::unpack(const char *buf) {
  double first = 0;
  std::memcpy(&first, buf, sizeof(double));
  const bool marked = first == kFormat;
  const char *values = marked ? buf + sizeof(double) : buf;
  TrainRestart r;
  for (int k = 0; k < (marked ? kFieldCount : kOldFieldCount); ++k)
    std::memcpy(&(r.*kFields[k]), values + k * sizeof(double), sizeof(double));
  return r;
}
