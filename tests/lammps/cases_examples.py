"""The shipped examples/ inputs, run as shipped.

CASES: name -> case(host_dir, root_dir), run by run_case.py (each a ctest, lammps.pair_uma.NAME).
"""
import math
import os

import numpy as np

from harness import BUILD, DEMO_MODEL, LAMMPS_POTENTIALS, LMP, SRC, check, close, in_root, reference, thermo


ROOT = None   # the sid root on the host (harness.run_case sets it)


def case_examples(h, r):
    """Every input in examples/ runs as shipped (plugin from LAMMPS_PLUGIN_PATH), with finite thermo; cu_otf
    also under -k on t 1 -sf kk (uma/kk in place); cu_otf_gated after its held-out frames are made as its
    README says (in.eam_heldout, ../cu_otf/heldout_frames.py), with 10 steps per state.
    Quantitative: the step-0 energy of the Cu NVE/NPT examples (the perfect 3x3x3 fcc lattice) and of
    the molecule example equals `uma eval` of the same structure, built independently here (ASE, the
    shipped extxyz); the NVE examples conserve energy."""
    from ase.build import bulk
    cu = bulk("Cu", "fcc", a=3.615, cubic=True).repeat((3, 3, 3))
    e_cu = reference(h, r, cu.get_chemical_symbols(), cu.get_positions(), cu.get_cell()[:], (True,) * 3,
                     "--task omat", model=DEMO_MODEL)["energy"]
    mol = [l.split() for l in open(f"{ROOT}{SRC}/examples/structures/ethanol_cation.extxyz").read().splitlines()[2:] if l]
    e_mol = reference(h, r, [m[0] for m in mol], [[float(v) for v in m[1:4]] for m in mol], np.eye(3) * 30,
                      (False,) * 3, "--task omol --charge 1 --spin 2")["energy"]
    # example -> (energy at step 0 from uma eval, NVE: largest |etotal - etotal(0)| per atom allowed)
    # (measured: 1.8e-5 and 7.9e-4 eV/atom; step-0 energies within 4e-8 relative)
    expect = {"cu_nve": (e_cu, 1e-4), "cu_npt": (e_cu, None), "omol_molecule": (e_mol, 2e-3)}
    for sub, name, np_, extra in (("cu_nve", "in.cu_nve", 1, ""), ("cu_npt", "in.cu_npt", 1, ""),
                                  ("omol_molecule", "in.ethanol_cation", 1, ""), ("oc20_slab", "in.pt_slab_o", 2, ""),
                                  ("cu_otf", "in.cu_otf", 2, "-var steps 20"),
                                  ("cu_otf", "in.cu_otf", 2, "-var steps 20 -k on t 1 -sf kk"),
                                  ("cu_otf_gated", "in.cu_otf_gated", 2, "-var stage 10")):
        d = f"{SRC}/examples/{sub}"
        if sub == "cu_otf_gated":
            p = in_root(f"cd {d} && LAMMPS_POTENTIALS={LAMMPS_POTENTIALS} {LMP} -in in.eam_heldout -screen none "
                        f"-log {r}/log.eam_heldout && python3 ../cu_otf/heldout_frames.py")
            check(p.returncode == 0 and "wrote 41 frames" in p.stdout, f"cu_otf_gated's held-out frames: {p.stdout}")
        p = in_root(f"cd {d} && LAMMPS_PLUGIN_PATH={BUILD} LAMMPS_POTENTIALS={LAMMPS_POTENTIALS} "
                    f"OMP_NUM_THREADS=1 mpirun --oversubscribe -np {np_} {LMP} -in {name} {extra} "
                    f"-log {r}/log.{sub} -screen none")
        log = open(os.path.join(h, "log." + sub)).read()
        check(p.returncode == 0 and "Total wall time" in log, f"example {sub} failed:\n{log[-2000:]}")
        if "-sf kk" in extra:
            check("pair uma/kk: in place on the Kokkos views" in log, f"example {sub} under -sf kk: not uma/kk in place")
            name += " -sf kk"
        _, rows = thermo(log)
        check(all(math.isfinite(v) for x in rows for v in x.values()), f"example {sub}: non-finite thermo")
        summary = ""
        if sub in expect:
            e_ref, drift_bound = expect[sub]
            close(rows[0]["PotEng"], e_ref, 1e-6 * abs(e_ref), f"example {sub}: step-0 energy against uma eval")
            summary = f"; step 0 {rows[0]['PotEng']:.6f} eV = uma eval {e_ref:.6f}"
            if drift_bound is not None:
                n = len(mol) if sub == "omol_molecule" else len(cu)
                drift = max(abs(x["TotEng"] - rows[0]["TotEng"]) for x in rows) / n
                check(drift < drift_bound, f"example {sub}: total energy drifts {drift:.2e} eV/atom")
                summary += f", |dE_total| <= {drift:.1e} eV/atom"
        print(f"  examples/{sub}/{name} on {np_} rank(s): {len(rows)} thermo rows{summary}")


CASES = {
    "examples": case_examples,
}
