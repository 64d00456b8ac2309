"""The harness of the LAMMPS tests (tests/lammps/run_case.py runs them in the project's sid root).

Running LAMMPS and the engine inside the root, reading LAMMPS's thermo output
and dumps, comparing them with the engine on the whole system, the inputs the
cases share, and run_case, which runs one case and prints PASS or FAIL.  The
paths inside the root come from scripts/root_layout.sh (scripts/root_layout.py).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
IN_SID = os.path.join(HERE, "..", "..", "scripts", "in_sid.sh")
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import root_layout  # noqa: E402

# Paths inside the root
SRC = root_layout.PROJECT                    # the project inside the root
BUILD = root_layout.BUILD                    # its build with the root's toolchain (scripts/build.sh)
PLUGIN = BUILD + "/umaplugin.so"
UMA = BUILD + "/uma"
PROBE = BUILD + "/libmpi_thread_probe.so"    # the PMPI probe (tests/lammps/mpi_thread_probe.cpp)
MODEL = SRC + "/potentials/uma-s-tiny-random.safetensors"
DEMO_MODEL = SRC + "/potentials/uma-s-cu-eam-demo.safetensors"   # trained on EAM copper
BALANCED_MODEL = SRC + "/tests/fixtures/s1p2.safetensors"   # UMA-S-1.2 layout: charge-balanced channels
LAMMPS = root_layout.LAMMPS                  # the LAMMPS install (scripts/lammps_env.sh)
TORCH_LIB = root_layout.TORCH + "/site-packages/torch/lib"   # the torch wheel's LibTorch
LMP = LAMMPS + "/bin/lmp"
LAMMPS_POTENTIALS = LAMMPS + "/share/lammps/potentials"   # LAMMPS's potential files (Cu_u3.eam)
WORK = "/tmp/uma-pair"                       # the cases' work folders
NKTV2P = 1.6021765e6                         # metal units: eV/A^3 -> bar

ROOT = None                                  # the root on the host (run_case sets it)


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def workdir(case):
    """A fresh work folder for the case: (its path on the host, its path inside the root)."""
    inside = f"{WORK}/{case}"
    d = os.path.join(ROOT, inside.lstrip("/"))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d, inside


ROOT_CALLS = {"count": 0, "seconds": 0.0}   # what the case spent in the root (run_case prints it)


def in_root(cmd):
    start = time.monotonic()
    p = subprocess.run([IN_SID, ROOT, "bash", "-c", cmd], capture_output=True, text=True)
    ROOT_CALLS["count"] += 1
    ROOT_CALLS["seconds"] += time.monotonic() - start
    return p


def lammps(host_dir, root_dir, name, text, np_=1, env="", fail=False, flags="", launch=""):
    """Runs `lmp FLAGS -in name` on np_ ranks (mpirun LAUNCH ...); returns the log text."""
    with open(os.path.join(host_dir, name), "w") as f:
        f.write(text)
    log = "log." + name
    cmd = (f"cd {root_dir} && {env} OMP_NUM_THREADS=1 mpirun --oversubscribe {launch} -np {np_} "
           f"{LMP} {flags} -in {name} -log {log} -screen none")
    start = time.monotonic()
    p = in_root(cmd)
    if os.environ.get("UMA_CASE_TIMES"):   # where a case spends its time (UMA_CASE_TIMES=1 scripts/quick.sh case NAME)
        print(f"    [{name}: {time.monotonic() - start:.1f} s on {np_} rank(s)]")
    path = os.path.join(host_dir, log)
    out = open(path).read() if os.path.exists(path) else ""
    if fail:
        check(p.returncode != 0 or "ERROR" in out, f"{name}: expected LAMMPS to fail, it did not")
        return out + p.stdout + p.stderr
    if p.returncode != 0:
        raise Failure(f"{name} on {np_} ranks failed (rc {p.returncode}):\n{out[-3000:]}\n{p.stderr[-2000:]}")
    return out


def lammps_batch(host_dir, root_dir, name, jobs, np_=1, env="", flags=""):
    """Several inputs in one lmp process (one start-up, one plugin load), each after a
    `clear` and into a log of its own: jobs is [(job, text)], every text a whole input
    (PRE included); returns {job: its log text}, as lammps() would have for each."""
    text = "".join(f"clear\nlog log.in.{job}\n{body}" for job, body in jobs)
    lammps(host_dir, root_dir, name, text, np_=np_, env=env, flags=flags)
    logs = {}
    for job, _ in jobs:
        path = os.path.join(host_dir, f"log.in.{job}")
        check(os.path.exists(path), f"{name}: job {job} wrote no log")
        logs[job] = open(path).read()
    return logs


def read_dump(path):
    """Last snapshot of a custom dump, rows sorted by id: (box, columns dict)."""
    lines = open(path).read().splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith("ITEM: TIMESTEP")]
    lines = lines[starts[-1]:]
    n = int(lines[3])
    bounds = lines[4].split()[3:]
    box = np.array([[float(v) for v in lines[5 + k].split()] for k in range(3)])
    cols = lines[8].split()[2:]
    data = np.array([[float(v) for v in l.split()] for l in lines[9:9 + n]])
    data = data[np.argsort(data[:, cols.index("id")])]
    return box, bounds, {c: data[:, k] for k, c in enumerate(cols)}


def cell_from_dump(box, bounds):
    """Lattice vectors from a (possibly triclinic) dump header."""
    if "xy" in bounds:
        (xlob, xhib, xy), (ylob, yhib, xz), (zlo, zhi, yz) = box
        xlo = xlob - min(0.0, xy, xz, xy + xz)
        xhi = xhib - max(0.0, xy, xz, xy + xz)
        ylo, yhi = ylob - min(0.0, yz), yhib - max(0.0, yz)
        return np.array([[xhi - xlo, 0, 0], [xy, yhi - ylo, 0], [xz, yz, zhi - zlo]])
    return np.diag(box[:, 1] - box[:, 0])


def reference(host_dir, root_dir, symbols, pos, cell, pbc, args, model=MODEL):
    """The engine on the whole system: energy, forces, atom energies, virials."""
    with open(os.path.join(host_dir, "ref.extxyz"), "w") as f:
        f.write(f"{len(symbols)}\n")
        lat = " ".join(f"{v:.17g}" for v in np.asarray(cell).reshape(-1))
        pb = " ".join("T" if p else "F" for p in pbc)
        f.write(f'Lattice="{lat}" Properties=species:S:1:pos:R:3 pbc="{pb}"\n')
        for s, p in zip(symbols, pos):
            f.write(f"{s} {p[0]:.17g} {p[1]:.17g} {p[2]:.17g}\n")
    p = in_root(f"OMP_NUM_THREADS=2 {UMA} eval {model} {root_dir}/ref.extxyz --json {args}")
    if p.returncode != 0:
        raise Failure("uma eval failed: " + p.stderr[-2000:])
    return json.loads(p.stdout)[0]


def thermo_runs(log):
    """Every run's thermo rows, in order: [[{column: value}, ...], ...]."""
    lines = log.splitlines()
    runs = []
    for h in [i for i, l in enumerate(lines) if l.split()[:1] == ["Step"]]:
        cols = lines[h].split()
        rows = []
        for l in lines[h + 1:]:
            parts = l.split()
            if len(parts) != len(cols) or not re.match(r"^-?\d", parts[0]):
                break
            rows.append(dict(zip(cols, (float(v) for v in parts))))
        runs.append(rows)
    check(runs and runs[-1], "no thermo output in the log")
    return runs


def thermo(log):
    """The last run's last thermo row as {column: value}, and all its rows."""
    rows = thermo_runs(log)[-1]
    return rows[-1], rows


def close(a, b, tol, what):
    a, b = np.asarray(a, float), np.asarray(b, float)
    err = np.max(np.abs(a - b)) if a.size else 0.0
    check(err <= tol, f"{what}: max deviation {err:.3e} > {tol:.1e}")
    return err


PRE = """plugin load {plugin}
units metal
atom_style atomic
"""
CU_BOX = """boundary p p p
lattice fcc 3.615
region box block 0 3 0 3 0 3
create_box {ntypes} box
create_atoms 1 box
mass * 63.546
displace_atoms all random 0.12 0.12 0.12 4242 units box
"""
OUTPUT = """compute pe all pe/atom
compute sa all stress/atom NULL
compute sumsa all reduce sum c_sa[1] c_sa[2] c_sa[3] c_sa[4] c_sa[5] c_sa[6]
compute sumpe all reduce sum c_pe
thermo_style custom step pe press pxx pyy pzz pxy pxz pyz vol c_sumpe c_sumsa[*]
thermo_modify format float %.15g
dump d all custom 1 dump.{tag} id type x y z fx fy fz c_pe c_sa[*]
dump_modify d format float %.15g sort id
run 0
"""


def compare_to_reference(host_dir, tag, log, ref, tol_f, tol_e, symbols_ok=True):
    """LAMMPS outputs of one `run 0` against the engine on the same structure."""
    t, _ = thermo(log)
    box, bounds, d = read_dump(os.path.join(host_dir, "dump." + tag))
    n = len(d["id"])
    forces = np.stack([d["fx"], d["fy"], d["fz"]], 1)
    e_ref = ref["energy"]
    close(t["PotEng"], e_ref, tol_e * max(1.0, abs(e_ref)), f"[{tag}] energy")
    close(forces, np.array(ref["forces"]).reshape(n, 3), tol_f, f"[{tag}] forces")
    close(d["c_pe"], ref["atom_energies"], tol_e * max(1.0, abs(e_ref)), f"[{tag}] pe/atom")
    close(t["c_sumpe"], t["PotEng"], 1e-9 * max(1.0, abs(e_ref)), f"[{tag}] sum of pe/atom vs pe")
    # pressure = W / V (no kinetic part: atoms at rest), in bar
    w = np.array(ref["virial"])
    press = np.array([t[k] for k in ("Pxx", "Pyy", "Pzz", "Pxy", "Pxz", "Pyz")])
    vol = t["Volume"]
    close(press * vol / NKTV2P, w, tol_f * 10, f"[{tag}] pressure tensor x V vs engine virial")
    # (virial in Voigt order xx yy zz xy xz yz)
    close(t["Press"] * vol / NKTV2P, np.mean(w[:3]), tol_f * 10, f"[{tag}] scalar pressure x V vs engine virial trace / 3")
    # stress/atom is -(per-atom virial) in bar A^3; its sum is -P V
    sa = np.stack([d[f"c_sa[{k}]"] for k in range(1, 7)], 1)
    close(-sa / NKTV2P, np.array(ref["atom_virials"]), tol_f * 10, f"[{tag}] stress/atom vs engine per-atom virial")
    close(np.array([t[f"c_sumsa[{k}]"] for k in range(1, 7)]), -press * vol,
          1e-6 * NKTV2P * max(1.0, np.abs(w).max()), f"[{tag}] sum of stress/atom vs -P V")
    return d


def dump_structure(host_dir, tag, symbols_of_type):
    box, bounds, d = read_dump(os.path.join(host_dir, "dump." + tag))
    pos = np.stack([d["x"], d["y"], d["z"]], 1)
    syms = [symbols_of_type[int(t)] for t in d["type"]]
    return syms, pos, cell_from_dump(box, bounds), d


def write_molecule_data(path, symbols, pos, charge_types):
    types = {s: k + 1 for k, s in enumerate(charge_types)}
    lo, hi = pos.min(0) - 5.0, pos.max(0) + 5.0
    with open(path, "w") as f:
        f.write(f"molecule\n\n{len(symbols)} atoms\n{len(types)} atom types\n\n")
        for k, (a, b) in enumerate(zip(lo, hi)):
            f.write(f"{a:.10f} {b:.10f} {'xyz'[k]}lo {'xyz'[k]}hi\n")
        f.write("\nMasses\n\n")
        masses = {"H": 1.008, "C": 12.011, "O": 15.999, "Cu": 63.546, "N": 14.007}
        for s, t in types.items():
            f.write(f"{t} {masses[s]}\n")
        f.write("\nAtoms # atomic\n\n")
        for k, (s, p) in enumerate(zip(symbols, pos)):
            f.write(f"{k + 1} {types[s]} {p[0]:.12f} {p[1]:.12f} {p[2]:.12f}\n")


def read_xyz(path):
    lines = open(path).read().splitlines()
    n = int(lines[0])
    rows = [l.split() for l in lines[2:2 + n]]
    return [r[0] for r in rows], np.array([[float(v) for v in r[1:4]] for r in rows])


HALO_OUT = """compute pe all pe/atom
compute sa all stress/atom NULL
thermo_style custom step pe pxx pyy pzz pxy pxz pyz vol
thermo_modify format float %.17g
dump d all custom 1 dump.{tag} id x y z fx fy fz c_pe c_sa[*]
dump_modify d format float %.17g sort id
run 0
"""


def halo_results(h, tag, log):
    """Energy, virial (eV), and per-atom rows of one `run 0` with HALO_OUT."""
    t, _ = thermo(log)
    _, _, d = read_dump(os.path.join(h, "dump." + tag))
    virial = np.array([t[k] for k in ("Pxx", "Pyy", "Pzz", "Pxy", "Pxz", "Pyz")]) * t["Volume"] / NKTV2P
    return {"energy": t["PotEng"], "virial": virial, "id": d["id"],
            "forces": np.stack([d["fx"], d["fy"], d["fz"]], 1), "atom_energy": d["c_pe"],
            "atom_virial": np.stack([d[f"c_sa[{k}]"] for k in range(1, 7)], 1)}


def same_as_one_rank(got, ref, what, tol=1e-10):
    """Every output within tol relative to the largest magnitude of its kind."""
    check(np.array_equal(got["id"], ref["id"]), f"[{what}] not the same atoms")
    worst = 0.0
    for key in ("energy", "virial", "forces", "atom_energy", "atom_virial"):
        a, b = np.asarray(got[key], float), np.asarray(ref[key], float)
        scale = max(1.0, float(np.max(np.abs(b))))
        err = float(np.max(np.abs(a - b))) / scale
        check(err <= tol, f"[{what}] {key}: deviation {err:.2e} of the one-rank value (relative), above {tol:.0e}")
        worst = max(worst, err)
    return worst


def run_case(cases, case, root, prefix=""):
    """Runs cases[case] in the sid root ROOT, in the work folder PREFIX + CASE; prints PASS or FAIL."""
    global ROOT
    ROOT = root
    cases[case].__globals__["ROOT"] = root   # the case's module sees the root as ROOT too
    check(os.path.exists(ROOT + PLUGIN), f"{PLUGIN} is not built in the root (scripts/build.sh builds it)")
    h, r = workdir(prefix + case)
    try:
        cases[case](h, r)
    except Failure as e:
        print(f"FAIL {case}: {e}")
        sys.exit(1)
    print(f"  {ROOT_CALLS['count']} commands in the root (lmp, uma eval), {ROOT_CALLS['seconds']:.1f} s")
    print(f"PASS {case}")
