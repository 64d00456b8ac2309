// What pair_style uma (and uma/kk) and fix uma/train share: the model the
// style evaluates and the fix trains.  The pair style implements it; the fix
// finds it among the pair styles and includes only this header.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace uma {
class UmaModel;
}

namespace LAMMPS_NS {

class UMAModelHandle {
 public:
  // What the style evaluates: the model file, the task and inputs, where it
  // runs, and the element of each atom type.
  struct Setup {
    std::string model_path, task, device;
    int charge = 0, spin = 0;
    std::vector<int> type_z;  // atomic number per type 1..ntypes (0: not mapped)
  };
  // Creates the style's engine first if there is none yet.
  virtual Setup training_setup() = 0;
  // Lets `copy` overwrite the evaluated weights; the experts are merged again
  // at the next step.
  virtual void set_weights(const std::function<void(uma::UmaModel &)> &copy) = 0;
  // Lets `read` see the evaluated weights where a fix has set them since
  // pair_coeff read the model file; false (and no call) where it has not.
  virtual bool read_trained_weights(const std::function<void(const uma::UmaModel &)> &read) = 0;
  // Whether it evaluates weights a fix has set since pair_coeff read the file.
  virtual bool holds_trained_weights() const = 0;

 protected:
  // Not deleted through this interface: the pair style's owner is LAMMPS.
  ~UMAModelHandle() = default;
};

}  // namespace LAMMPS_NS
