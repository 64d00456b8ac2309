#!/usr/bin/env bash
# Checks the LAMMPS that scripts/lammps_env.sh built: version, the packages
# the plugin and the workflow tests need, a KOKKOS run, a 2-rank MPI run, and
# LAMMPS's Python module and ASE in the root's python3.  usage: check_environment.sh ROOT
set -euo pipefail
root="$1"
here="$(cd "$(dirname "$0")" && pwd)"
run() { "$here/../../scripts/in_sid.sh" "$root" "$@"; }
cp "$here/in.lj_smoke" "$root/tmp/in.lj_smoke"
lmp='"$UMA_ROOT_LAMMPS/bin/lmp"'   # expanded inside the root (scripts/in_sid.sh)
help=$(run bash -c "$lmp -h")
grep -q "4 Jul 2026" <<< "$help" || { echo "FAIL: not LAMMPS 4 Jul 2026"; exit 1; }
for pkg in KOKKOS PLUGIN MANYBODY MC REPLICA PYTHON; do   # scripts/lammps_env.sh says who needs each
  grep -qw -- "$pkg" <<< "$(sed -n '/Installed packages/,/List of individual/p' <<< "$help")" || { echo "FAIL: package $pkg missing"; exit 1; }
done
# the Kokkos styles the tests run through -sf kk (scripts/lammps_env.sh leaves out those nothing runs)
for style in eam/kk eam/alloy/kk lj/cut/kk hybrid/overlay/kk nve/kk nvt/kk npt/kk langevin/kk setforce/kk; do
  grep -qw -- "$style" <<< "$help" || { echo "FAIL: Kokkos style $style missing"; exit 1; }
done
grep -q "Total wall time" <<< "$(run bash -c "cd /tmp && $lmp -k on t 2 -sf kk -in in.lj_smoke -log none")" ||
  { echo "FAIL: KOKKOS run"; exit 1; }
grep -q "Total wall time" <<< "$(run bash -c "cd /tmp && mpirun -np 2 $lmp -in in.lj_smoke -log none")" ||
  { echo "FAIL: MPI run"; exit 1; }
py=$(run python3 -c 'from lammps import lammps
import ase
lmp = lammps(cmdargs=["-log", "none", "-screen", "none"])
print("python module", lmp.version(), "ase", ase.__version__)' 2>&1) ||
  { echo "FAIL: LAMMPS's Python module or ASE in the root's python3: $py"; exit 1; }
echo "$py"
echo "lammps environment: all checks passed"
