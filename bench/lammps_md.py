#!/usr/bin/env python3
"""MD benchmarks of pair_style uma (not tests).  Side by side in one run:

(a) MD steps/s: LAMMPS `pair_style uma` + `fix nve` against fairchem-core's
    ASE calculator (fast CPU settings) driving ASE's VelocityVerlet, with the
    same weights (the full-size UMA-S-1.1-shaped model of bench/make_model.py)
    on the same Cu crystal, both on the same threads.
(b) LAMMPS's bench/in.eam problem (fcc Cu, 3.615 A, 1 fs, NVE at 1600 K start)
    scaled down to what two cores can do, with LAMMPS's own Performance line
    for eam (Cu_u3.eam) next to uma (full-size and the shipped tiny model).
(c) peak resident memory of lmp for two sizes, and its growth per atom.

usage: bench/lammps_md.py ROOT [--steps N] [--out FILE]   (ROOT: the LAMMPS sid root;
       run scripts/build.sh and bench/make_model.py first; scripts/bench.sh --lammps does both)
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
IN_SID = os.path.join(HERE, "..", "scripts", "in_sid.sh")
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import root_layout  # noqa: E402  (the paths inside the LAMMPS root)

DEMO = root_layout.PROJECT + "/potentials/uma-s-cu-eam-demo.safetensors"   # the shipped demo model, in the root
CACHE = os.path.expanduser("~/.cache/lammps-uma/bench")
FULL_PT = os.path.join(CACHE, "uma-s-1p1-random.pt")
FULL = os.path.join(CACHE, "uma-s-1p1-random.safetensors")
TINY = os.path.join(HERE, "..", "potentials", "uma-s-tiny-random.safetensors")

# A Cu crystal of nx x ny x nz fcc cells (4 atoms each)
CU_CRYSTAL = """units metal
atom_style atomic
lattice fcc 3.615
region box block 0 {nx} 0 {ny} 0 {nz}
create_box 1 box
create_atoms 1 box
mass 1 63.546
"""

EAM_STYLE = CU_CRYSTAL + """{pair}
velocity all create 1600.0 376847 loop geom
neighbor 1.0 bin
neigh_modify every 1 delay 5 check yes
fix 1 all nve
timestep 0.001
thermo {steps}
run 1
run {steps}
"""


# Cu NVE with pair_style uma and `compute pair uma` (bench/lammps_ranks.py, bench/lammps_kokkos.py)
CU_NVE = CU_CRYSTAL + """pair_style uma task omat
pair_coeff * * {model} Cu
velocity all create 300 4928 loop geom
fix 1 all nve
timestep 0.001
compute pu all pair uma
thermo_style custom step pe {columns}
run 1
run {steps}
"""


def lammps(root, workdir, name, text, threads, ranks=None, env="", flags=""):
    """Runs `lmp FLAGS` in the root (under mpirun on `ranks` ranks if given,
    each with `threads` threads); returns (Performance dict, peak RSS MB of
    the largest process; and the log."""
    host = os.path.join(root, workdir.lstrip("/"))
    with open(os.path.join(host, name), "w") as f:
        f.write(text)
    wrapper = ("import resource,subprocess,sys; r=subprocess.run(sys.argv[1:]); "
               "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    launch = f"mpirun --oversubscribe -np {ranks} " if ranks else ""
    cmd = (f"cd {workdir} && {env} LAMMPS_PLUGIN_PATH={root_layout.BUILD} OMP_NUM_THREADS={threads} "
           f"python3 -c \"{wrapper}\" {launch}{root_layout.LAMMPS}/bin/lmp {flags} -in {name} -log log.{name} -screen none")
    p = subprocess.run([IN_SID, root, "bash", "-c", cmd], capture_output=True, text=True)
    log = open(os.path.join(host, "log." + name)).read()
    if p.returncode != 0:
        raise SystemExit(f"{name} failed:\n{log[-2000:]}\n{p.stderr[-1000:]}")
    perf = [l for l in log.splitlines() if l.startswith("Performance:")][-1]
    steps_s = float(re.search(r"([\d.]+) timesteps/s", perf).group(1))
    rss = int(re.search(r"MAXRSS (\d+)", p.stdout).group(1)) / 1024.0
    return {"performance": perf, "timesteps_per_s": steps_s, "peak_rss_mb": rss}, log


def fairchem_md(cells, steps, threads):
    code = f"""
import json, time, resource, numpy as np, torch
torch.set_num_threads({threads})
from ase import units
from ase.build import bulk
from ase.md.verlet import VelocityVerlet
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution
from fairchem.core import FAIRChemCalculator
from fairchem.core.units.mlip_unit import load_predict_unit
from fairchem.core.units.mlip_unit.api.inference import InferenceSettings
s = InferenceSettings(tf32=False, activation_checkpointing=False, merge_mole=True, compile=False,
                      execution_mode="umas_fast_pytorch", internal_graph_gen_version=2)
unit = load_predict_unit({FULL_PT!r}, inference_settings=s, device="cpu")
atoms = bulk("Cu", "fcc", a=3.615, cubic=True).repeat({tuple(cells)!r})
atoms.calc = FAIRChemCalculator(unit, task_name="omat")
MaxwellBoltzmannDistribution(atoms, temperature_K=1600, rng=np.random.default_rng(1))
dyn = VelocityVerlet(atoms, 1.0 * units.fs)
dyn.run(1)
t0 = time.perf_counter(); dyn.run({steps}); dt = time.perf_counter() - t0
print(json.dumps({{"atoms": len(atoms), "timesteps_per_s": {steps} / dt,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit("fairchem MD failed:\n" + p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=os.path.join(CACHE, "lammps_md.json"))
    a = ap.parse_args()
    for f in (FULL, FULL_PT):
        if not os.path.exists(f):
            raise SystemExit(f"{f} is missing: run bench/make_model.py {CACHE}")
    workdir = "/tmp/uma-bench"
    host = os.path.join(a.root, workdir.lstrip("/"))
    os.makedirs(host, exist_ok=True)
    shutil.copy(FULL, os.path.join(host, "full.safetensors"))
    shutil.copy(TINY, os.path.join(host, "tiny.safetensors"))
    shutil.copy(os.path.join(a.root, "src/lammps/potentials/Cu_u3.eam"), host)
    uma_full = "pair_style uma task omat\npair_coeff * * full.safetensors Cu"
    uma_tiny = "pair_style uma task omat\npair_coeff * * tiny.safetensors Cu"
    eam = "pair_style eam\npair_coeff 1 1 Cu_u3.eam"
    results = {"threads": a.threads, "steps": a.steps, "date": time.strftime("%Y-%m-%d")}

    # (a) same MD, same weights: 64 atoms (2 x 2 x 4 cubic cells)
    cells = (2, 2, 4)
    fc = fairchem_md(cells, a.steps, a.threads)
    lm, _ = lammps(a.root, workdir, "in.md_full", EAM_STYLE.format(nx=2, ny=2, nz=4, pair=uma_full, steps=a.steps),
                a.threads)
    results["md_64"] = {"fairchem_ase": fc, "lammps_uma": lm,
                        "speedup": lm["timesteps_per_s"] / fc["timesteps_per_s"]}
    print(f"(a) 64-atom Cu MD, full-size model: LAMMPS uma {lm['timesteps_per_s']:.3f} steps/s, "
          f"fairchem ASE {fc['timesteps_per_s']:.3f} steps/s -> {results['md_64']['speedup']:.2f}x")

    # (b) bench/in.eam scaled down: 4 x 4 x 4 cells = 256 atoms
    rows = {}
    for label, pair, steps in (("eam", eam, 1000), ("uma tiny model", uma_tiny, 20),
                               ("uma full-size model", uma_full, a.steps)):
        rows[label], _ = lammps(a.root, workdir, "in.eam_" + label.split()[-2 if label != "eam" else 0],
                             EAM_STYLE.format(nx=4, ny=4, nz=4, pair=pair, steps=steps), a.threads)
        print(f"(b) 256-atom in.eam-style, {label}: {rows[label]['performance']}")
    results["in_eam_256"] = rows

    # (c) peak memory: 64 and 256 atoms with the full-size model
    rss64, rss256 = lm["peak_rss_mb"], rows["uma full-size model"]["peak_rss_mb"]
    results["memory"] = {"peak_rss_mb_64": rss64, "peak_rss_mb_256": rss256,
                         "mb_per_atom": (rss256 - rss64) / (256 - 64)}
    print(f"(c) lmp peak RSS with the full-size model: 64 atoms {rss64:.0f} MB, 256 atoms {rss256:.0f} MB, "
          f"{results['memory']['mb_per_atom']:.2f} MB per added atom")
    with open(a.out, "w") as f:
        json.dump(results, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
