#include "core/elements.h"

namespace uma {
namespace {
constexpr const char* kSymbols[] = {
    "",   "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne", "Na", "Mg", "Al", "Si",
    "P",  "S",  "Cl", "Ar", "K",  "Ca", "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu",
    "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb", "Sr", "Y",  "Zr", "Nb", "Mo", "Tc", "Ru",
    "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I",  "Xe", "Cs", "Ba", "La", "Ce", "Pr",
    "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W",
    "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "At", "Rn", "Fr", "Ra", "Ac",
    "Th", "Pa", "U",  "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md", "No", "Lr", "Rf",
    "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og"};
constexpr int kCount = sizeof(kSymbols) / sizeof(kSymbols[0]);
}  // namespace

int atomic_number(const std::string& symbol) {
  for (int z = 1; z < kCount; ++z)
    if (symbol == kSymbols[z]) return z;
  return 0;
}

std::string element_symbol(int z) { return z > 0 && z < kCount ? kSymbols[z] : ""; }

torch::Tensor count_atomic_numbers(const torch::Tensor& numbers, int64_t Z) {
  const auto slot =
      torch::where((numbers >= 0) & (numbers < Z), numbers, torch::full_like(numbers, Z));
  return torch::zeros({Z + 1}, numbers.options()).index_add_(0, slot, torch::ones_like(slot));
}

}  // namespace uma
