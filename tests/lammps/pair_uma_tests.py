#!/usr/bin/env python3
"""pair_style uma through real LAMMPS (4 Jul 2026, in the project's sid root).

Each case writes LAMMPS inputs, runs the `lmp` executable (1, 2 or 4 MPI
ranks) with umaplugin.so, and checks what LAMMPS reports -- energies, forces,
compute pe/atom, compute pressure, compute stress/atom -- against the engine
evaluating the whole system (`uma eval --json`, built with the same toolchain).

usage: pair_uma_tests.py ROOT CASE      (ROOT: the sid root; CASE: see CASES)
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
IN_SID = os.path.join(HERE, "..", "..", "scripts", "in_sid.sh")
SRC = "/src/uma-check"                       # the project inside the root
PLUGIN = SRC + "/build-root/umaplugin.so"
UMA = SRC + "/build-root/uma"
MODEL = SRC + "/potentials/uma-s-tiny-random.safetensors"
DEMO_MODEL = SRC + "/potentials/uma-s-cu-eam-demo.safetensors"   # trained on EAM copper
BALANCED_MODEL = SRC + "/tests/fixtures/s1p2.safetensors"   # UMA-S-1.2 layout: charge-balanced channels
NKTV2P = 1.6021765e6                         # metal units: eV/A^3 -> bar

ROOT = None


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def workdir(case):
    d = os.path.join(ROOT, "tmp", "uma-pair", case)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d, "/tmp/uma-pair/" + case


def in_root(cmd):
    return subprocess.run([IN_SID, ROOT, "bash", "-c", cmd], capture_output=True, text=True)


def lammps(host_dir, root_dir, name, text, np_=1, env="", fail=False, flags="", launch=""):
    """Runs `lmp FLAGS -in name` on np_ ranks (mpirun LAUNCH ...); returns the log text."""
    with open(os.path.join(host_dir, name), "w") as f:
        f.write(text)
    log = "log." + name
    cmd = (f"cd {root_dir} && {env} OMP_NUM_THREADS=1 mpirun --oversubscribe {launch} -np {np_} "
           f"/opt/lammps/bin/lmp {flags} -in {name} -log {log} -screen none")
    p = in_root(cmd)
    path = os.path.join(host_dir, log)
    out = open(path).read() if os.path.exists(path) else ""
    if fail:
        check(p.returncode != 0 or "ERROR" in out, f"{name}: expected LAMMPS to fail, it did not")
        return out + p.stdout + p.stderr
    if p.returncode != 0:
        raise Failure(f"{name} on {np_} ranks failed (rc {p.returncode}):\n{out[-3000:]}\n{p.stderr[-2000:]}")
    return out


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


# ---------------------------------------------------------------- cases

def case_ranks(h, r):
    """Orthogonal periodic Cu, fp64: 1, 2, 4 ranks and newton off equal the engine."""
    base = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=1) + \
        f"pair_style uma task omat precision fp64\npair_coeff * * {MODEL} Cu\n"
    energy = None
    for np_, newton in ((1, "on"), (2, "on"), (4, "on"), (2, "off")):
        tag = f"np{np_}_{newton}"
        log = lammps(h, r, f"in.{tag}", f"newton {newton}\n" + base + OUTPUT.format(tag=tag), np_=np_)
        # atom IDs depend on the rank count (create_atoms): reference per run
        syms, pos, cell, _ = dump_structure(h, tag, {1: "Cu"})
        ref = reference(h, r, syms, pos, cell, (True,) * 3, "--task omat --precision fp64")
        if energy is None:
            energy = ref["energy"]
        close(ref["energy"], energy, 1e-10 * abs(energy), f"[{tag}] same structure as on one rank")
        compare_to_reference(h, tag, log, ref, 1e-9, 1e-10)
        if np_ > 1:
            check(f"pair uma: halo exchange on {np_} ranks" in log, "the multi-rank run did not report its halo exchange")
        print(f"  {tag}: matches the engine")


def case_memory(h, r):
    """A memory budget too small for the stored activations: the edge work is
    recomputed in chunks (logged), the measured peak falls, and 1 and 2 ranks
    still equal the engine."""
    base = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=1)
    peaks = {}
    for np_, budget in ((1, None), (1, 0.05), (2, 0.05)):
        tag = f"np{np_}_" + ("auto" if budget is None else "tight")
        memory = "" if budget is None else f" memory {budget}"
        log = lammps(h, r, f"in.{tag}", base + f"pair_style uma task omat precision fp64{memory}\n"
                     f"pair_coeff * * {MODEL} Cu\n" + OUTPUT.format(tag=tag) + "info memory out log\n", np_=np_,
                     env="UMA_KEEP_MEMORY=0")
        plans = re.findall(r"pair uma: memory plan(?: of rank 0)? at step 0: (.*)", log)
        check(len(plans) == 1, f"[{tag}] expected one memory-plan line, got {plans}")
        want = "stored activations" if budget is None else "recomputed edge work in chunks of"
        check(want in plans[0], f"[{tag}] expected the plan to say '{want}': {plans[0]}")
        rss = re.findall(r"Maximum resident set size: ([0-9.]+) Mbyte", log)
        check(len(rss) == 1, f"[{tag}] no 'info memory' line in the log")
        peaks[tag] = float(rss[0]) * 2 ** 20, float(re.search(r"predicted peak ([0-9.]+) GB", plans[0]).group(1)) * 1e9
        syms, pos, cell, _ = dump_structure(h, tag, {1: "Cu"})
        ref = reference(h, r, syms, pos, cell, (True,) * 3, "--task omat --precision fp64")
        compare_to_reference(h, tag, log, ref, 1e-9, 1e-10)
        print(f"  {tag}: {plans[0]}; peak RSS (rank 0) {peaks[tag][0] / 1e6:.0f} MB; matches the engine (stored path)")
    # Measured on rank 0 (LAMMPS's `info memory`, the process's maximum RSS,
    # freed memory given back): the tight budget's run peaks lower than the
    # stored path's by at least half of what the two plans predict between them.
    (stored, stored_pred), (tight, tight_pred) = peaks["np1_auto"], peaks["np1_tight"]
    check(stored - tight >= 0.5 * (stored_pred - tight_pred),
          f"1 rank: the tight budget lowered the peak RSS by {(stored - tight) / 1e6:.0f} MB; the plans predict "
          f"{(stored_pred - tight_pred) / 1e6:.0f} MB between them")
    print(f"  1 rank: peak RSS {stored / 1e6:.0f} MB stored, {tight / 1e6:.0f} MB in chunks "
          f"(predicted difference {(stored_pred - tight_pred) / 1e6:.0f} MB)")


def case_ghost_cutoff(h, r):
    """On 2 ranks the halo exchange needs LAMMPS's usual ghost cutoff (cutoff + skin);
    the deep-shell reference (UMA_GHOST_SHELL=deep) raises it to (layers + 1) x cutoff
    + skin, and switching to another pair style gives back the cutoff that style needs."""
    text = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=1) + \
        f"pair_style uma task omat\npair_coeff * * {MODEL} Cu\nrun 0\ninfo communication out log\n" \
        "pair_style lj/cut 2.5\npair_coeff * * 0.1 2.3\nrun 0\ninfo communication out log\n"
    for env, want in (("", 6.0 + 2.0), ("UMA_GHOST_SHELL=deep", 3 * 6.0 + 2.0)):
        log = lammps(h, r, "in.ghost", text, np_=2, env=env)
        cuts = [float(v) for v in re.findall(r"Communication cutoff = ([0-9.eE+-]+)", log)]
        check(len(cuts) == 2, f"expected two 'Communication cutoff' lines, got {cuts}")
        check(abs(cuts[0] - want) < 1e-9, f"{env or 'halo exchange'}: the ghost cutoff with uma should be "
              f"{want} A, got {cuts[0]}")
        check(abs(cuts[1] - 4.5) < 1e-9, f"after switching to lj/cut 2.5 (skin 2) the cutoff should be 4.5, got {cuts[1]}")
        print(f"  {env or 'halo exchange'}: ghost cutoff {cuts[0]} A with uma, {cuts[1]} A after switching to lj/cut")


def case_triclinic(h, r):
    """Skewed triclinic cell, fp64, 1 and 2 ranks."""
    box = """boundary p p p
lattice fcc 3.615
region box prism 0 3 0 3 0 3 1.1 -0.7 0.5
create_box 1 box
create_atoms 1 box
mass 1 63.546
displace_atoms all random 0.1 0.1 0.1 777 units box
"""
    base = PRE.format(plugin=PLUGIN) + box + f"pair_style uma task omat precision fp64\npair_coeff * * {MODEL} Cu\n"
    ref = None
    for np_ in (1, 2):
        tag = f"np{np_}"
        log = lammps(h, r, f"in.{tag}", base + OUTPUT.format(tag=tag), np_=np_)
        syms, pos, cell, _ = dump_structure(h, tag, {1: "Cu"})
        ref = reference(h, r, syms, pos, cell, (True,) * 3, "--task omat --precision fp64")
        compare_to_reference(h, tag, log, ref, 1e-9, 1e-10)
        print(f"  triclinic {tag}: matches the engine")


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


def case_molecule(h, r):
    """Shrink-wrapped (non-periodic) omol cation with charge 1 and spin 2, fp64, 1 and 2 ranks."""
    syms, pos = read_xyz(os.path.join(HERE, "..", "..", "examples", "structures", "ethanol_cation.extxyz"))
    order = ["C", "O", "H"]
    write_molecule_data(os.path.join(h, "mol.data"), syms, pos, order)
    base = PRE.format(plugin=PLUGIN) + "boundary s s s\nread_data mol.data\n" + \
        f"pair_style uma task omol charge 1 spin 2 precision fp64\npair_coeff * * {MODEL} C O H\n"
    ref = reference(h, r, syms, pos, np.zeros((3, 3)), (False,) * 3,
                    "--task omol --charge 1 --spin 2 --precision fp64")
    for np_ in (1, 2):
        tag = f"np{np_}"
        log = lammps(h, r, f"in.{tag}", base + OUTPUT.format(tag=tag), np_=np_)
        t, _ = thermo(log)
        _, _, d = read_dump(os.path.join(h, "dump." + tag))
        forces = np.stack([d["fx"], d["fy"], d["fz"]], 1)
        close(t["PotEng"], ref["energy"], 1e-10 * abs(ref["energy"]), f"[{tag}] energy")
        close(forces, np.array(ref["forces"]).reshape(-1, 3), 1e-9, f"[{tag}] forces")
        close(d["c_pe"], ref["atom_energies"], 1e-9, f"[{tag}] pe/atom")
        print(f"  molecule {tag}: matches the engine")
    # the charge and spin keywords reach the model
    log = lammps(h, r, "in.neutral", base.replace("charge 1 spin 2", "charge 0 spin 1") +
                 "thermo_style custom step pe\nrun 0\n")
    t, _ = thermo(log)
    check(abs(t["PotEng"] - ref["energy"]) > 1e-6, "charge/spin keywords had no effect on the energy")


def case_empty_ranks(h, r):
    """A molecule in a large periodic box on 4 slab subdomains: three ranks own no atom.
    Both model kinds, including one with a whole-system sum in every layer (collectives)."""
    syms, pos = read_xyz(os.path.join(HERE, "..", "..", "examples", "structures", "ethanol_cation.extxyz"))
    pos = pos - pos.min(0) + 2.0
    write_molecule_data(os.path.join(h, "mol.data"), syms, pos, ["C", "O", "H"])
    text = open(os.path.join(h, "mol.data")).read()
    # a 40 A periodic box instead of the molecule's bounding box
    text = re.sub(r"\S+ \S+ xlo xhi", "0 40 xlo xhi", text)
    text = re.sub(r"\S+ \S+ ylo yhi", "0 16 ylo yhi", text)
    text = re.sub(r"\S+ \S+ zlo zhi", "0 16 zlo zhi", text)
    open(os.path.join(h, "mol.data"), "w").write(text)
    cell = np.diag([40.0, 16.0, 16.0])
    for model, task, label in ((MODEL, "omat", "tiny"), (BALANCED_MODEL, "omat", "balanced")):
        base = PRE.format(plugin=PLUGIN) + "boundary p p p\nprocessors 4 1 1\nread_data mol.data\n" + \
            f"pair_style uma task {task} precision fp64\npair_coeff * * {model} C O H\n"
        ref = reference(h, r, syms, pos, cell, (True,) * 3, f"--task {task} --precision fp64", model)
        tag = label
        log = lammps(h, r, f"in.{tag}", base + OUTPUT.format(tag=tag), np_=4)
        check(re.search(r"Nlocal:\s+\S+ ave\s+9 max\s+0 min", log) is not None,
              "expected ranks without atoms (Nlocal min 0)")
        compare_to_reference(h, tag, log, ref, 1e-9, 1e-10)
        print(f"  {label} model on 4 ranks, three of them empty: matches the engine")


def case_balanced_model(h, r):
    """A UMA-S-1.2-layout model (charge-balanced channels: a whole-system sum in every layer), 1 and 2 ranks."""
    base = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=1) + \
        f"pair_style uma task omat precision fp64\npair_coeff * * {BALANCED_MODEL} Cu\n"
    ref = None
    for np_ in (1, 2):
        tag = f"np{np_}"
        log = lammps(h, r, f"in.{tag}", base + OUTPUT.format(tag=tag), np_=np_)
        syms, pos, cell, _ = dump_structure(h, tag, {1: "Cu"})
        ref = reference(h, r, syms, pos, cell, (True,) * 3, "--task omat --precision fp64", BALANCED_MODEL)
        compare_to_reference(h, tag, log, ref, 1e-9, 1e-10)
        print(f"  balanced model {tag}: matches the engine")


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


def case_halo(h, r):
    """The halo exchange on 2, 3 and 4 ranks (processors 2x1x1, 3x1x1, 2x2x1, 1x2x2)
    gives the one-rank energy, forces, virial, per-atom energies and per-atom
    virials to 1e-10 (fp64): orthogonal Cu with subdomains thinner than the
    cutoff, a skewed triclinic cell, a slab (p p f), a molecule with empty ranks,
    a charge-balanced model; newton on and off; comm_style tiled with recursive
    bisection; and Cu in fp32 to 2e-5.  The deep-shell reference scheme
    (UMA_GHOST_SHELL=deep) is held to the same bound."""
    syms, mol = read_xyz(os.path.join(HERE, "..", "..", "examples", "structures", "ethanol_cation.extxyz"))
    mol = mol - mol.min(0) + 2.0
    systems = {
        # name: (structure commands, element map, pair_style arguments, model, runs: (grid, newton))
        "cu": ("boundary p p p\nlattice fcc 3.615\nregion box block 0 4 0 4 0 4\ncreate_box 1 box\n"
               "create_atoms 1 box\nmass 1 63.546\ndisplace_atoms all random 0.12 0.12 0.12 4242 units box\n",
               "Cu", "task omat", MODEL,
               [("2 1 1", "on"), ("3 1 1", "on"), ("2 2 1", "on"), ("1 2 2", "on"), ("2 2 1", "off"),
                ("4 1 1", "off"), ("2 1 1", "deep"), ("tiled", "on")]),
        "triclinic": ("boundary p p p\nlattice fcc 3.615\nregion box prism 0 3 0 3 0 3 1.1 -0.7 0.5\n"
                      "create_box 1 box\ncreate_atoms 1 box\nmass 1 63.546\n"
                      "displace_atoms all random 0.1 0.1 0.1 777 units box\n",
                      "Cu", "task omat", MODEL, [("2 1 1", "on"), ("2 2 1", "off")]),
        "slab": ("boundary p p f\nlattice fcc 3.615\nregion box block 0 3 0 3 -1 5\ncreate_box 1 box\n"
                 "region atoms block 0 3 0 3 0 3\ncreate_atoms 1 region atoms\nmass 1 63.546\n"
                 "displace_atoms all random 0.1 0.1 0.1 99 units box\n",
                 "Cu", "task omat", MODEL, [("2 1 1", "on"), ("1 2 2", "on")]),
        "molecule": (None, "C O H", "task omol charge 1 spin 2", MODEL, [("3 1 1", "on"), ("2 2 1", "off")]),
        # float32 rows travel two to a double: the same system in fp32, to fp32 rounding
        "cu_fp32": ("boundary p p p\nlattice fcc 3.615\nregion box block 0 4 0 4 0 4\ncreate_box 1 box\n"
                    "create_atoms 1 box\nmass 1 63.546\ndisplace_atoms all random 0.12 0.12 0.12 4242 units box\n",
                    "Cu", "task omat precision fp32", MODEL, [("2 1 1", "on"), ("2 2 1", "off")]),
        "balanced": ("boundary p p p\nlattice fcc 3.615\nregion box block 0 3 0 3 0 3\ncreate_box 1 box\n"
                     "create_atoms 1 box\nmass 1 63.546\ndisplace_atoms all random 0.12 0.12 0.12 31 units box\n",
                     "Cu", "task omat", BALANCED_MODEL, [("2 1 1", "on"), ("1 2 2", "off")]),
    }
    worst = 0.0
    for name, (build, elements, args, model, runs) in systems.items():
        if build is None:   # a molecule in a 40 x 16 x 16 A periodic box: most subdomains are empty
            write_molecule_data(os.path.join(h, f"{name}.data"), syms, mol, ["C", "O", "H"])
            text = open(os.path.join(h, f"{name}.data")).read()
            for ax, length in (("x", 40), ("y", 16), ("z", 16)):
                text = re.sub(rf"\S+ \S+ {ax}lo {ax}hi", f"0 {length} {ax}lo {ax}hi", text)
            open(os.path.join(h, f"{name}.data"), "w").write(text)
            boundary = "boundary p p p\n"
        else:   # built once, so that every run has the same atom IDs
            lammps(h, r, f"in.{name}_build", PRE.format(plugin=PLUGIN) + build + f"write_data {name}.data\n")
            boundary = build.splitlines()[0] + "\n"
        if "precision" not in args:
            args += " precision fp64"
        tol = 2e-5 if "fp32" in args else 1e-10
        style = f"pair_style uma {args}\npair_coeff * * {model} {elements}\n"
        base = PRE.format(plugin=PLUGIN) + boundary + "{grid}" + f"read_data {name}.data\n" + style
        tag = f"{name}_1"
        ref = halo_results(h, tag, lammps(h, r, f"in.{tag}", base.format(grid="") + HALO_OUT.format(tag=tag)))
        for grid, newton in runs:
            tiled = grid == "tiled"   # comm_style tiled, recursive bisection over 3 ranks
            np_ = 3 if tiled else int(np.prod([int(v) for v in grid.split()]))
            tag = f"{name}_{grid.replace(' ', 'x')}_{newton}"
            deep = newton == "deep"   # the reference scheme: (layers + 1) x cutoff shell, no exchange
            text = f"newton {'on' if deep else newton}\n" + \
                base.format(grid="comm_style tiled\n" if tiled else f"processors {grid}\n")
            text = text.replace(style, ("balance 1.0 rcb\n" if tiled else "") + style) + HALO_OUT.format(tag=tag)
            log = lammps(h, r, f"in.{tag}", text, np_=np_, env="UMA_GHOST_SHELL=deep" if deep else "")
            want = "UMA_GHOST_SHELL=deep: no halo exchange" if deep else f"pair uma: halo exchange on {np_} ranks"
            check(want in log, f"[{tag}] the log does not say '{want}'")
            if name == "molecule":
                check(re.search(r"Nlocal:\s+\S+ ave\s+\d+ max\s+0 min", log) is not None,
                      f"[{tag}] expected ranks without atoms")
            err = same_as_one_rank(halo_results(h, tag, log), ref, tag, tol)
            if tol == 1e-10:
                worst = max(worst, err)
            scheme = "deep ghost shell (UMA_GHOST_SHELL=deep)" if deep else f"newton {newton}"
            print(f"  {name}, processors {grid}, {scheme}: equals one rank (worst {err:.1e} relative)")
    print(f"  worst deviation from one rank over all fp64 runs: {worst:.1e}")


PROBE = SRC + "/build-root/libmpi_thread_probe.so"


def probe_counts(h, tag, np_):
    """Per rank: (calls, off the main thread, inside an autograd pass, first bad call) from the PMPI probe."""
    out = []
    for rank in range(np_):
        path = os.path.join(h, f"probe.{tag}.{rank}")
        check(os.path.exists(path), f"[{tag}] rank {rank} wrote no MPI probe record (was the probe preloaded?)")
        v = open(path).read().split()
        out.append((int(v[1]), int(v[3]), int(v[5]), v[7]))
    return out


def case_mpi_threads(h, r):
    """Every MPI call of a run is made on LAMMPS's main thread and outside any LibTorch autograd pass
    (on a GPU, autograd runs backward nodes on its own worker threads, and LAMMPS initialises MPI at
    thread level SINGLE).  A PMPI wrapper preloaded into lmp (tests/lammps/mpi_thread_probe.cpp)
    records every call: 2 ranks with the halo exchange and a charge-balanced model (collectives in
    every block, forward and backward), with pair_style uma and uma/kk, run 0 and 5 NVE steps; and
    fix uma/train labelling with EAM and training on 2 ranks."""
    write_data = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=1)
    runs = {
        "balanced": (write_data + f"pair_style uma task omat precision fp64\npair_coeff * * {BALANCED_MODEL} Cu\n"
                     "velocity all create 300 5 loop geom\nfix 1 all nve\nrun 0\nrun 5\n", "", ""),
        "balanced_kk": (write_data + f"pair_style uma task omat precision fp64\npair_coeff * * {BALANCED_MODEL} Cu\n"
                        "velocity all create 300 5 loop geom\nfix 1 all nve\nrun 0\nrun 5\n", "-k on t 1 -sf kk", ""),
        "train": (write_data + f"pair_style uma task omat\npair_coeff * * {MODEL} Cu\n"
                  "velocity all create 500 4242 loop geom\nfix 1 all nve\n"
                  "fix learn all uma/train 2 label 2 lr 1e-3 print 2 reference eam coeff 1 1 Cu_u3.eam\nrun 4\n",
                  "", "LAMMPS_POTENTIALS=/opt/lammps/share/lammps/potentials"),
    }
    for tag, (text, flags, env) in runs.items():
        log = lammps(h, r, f"in.{tag}", text, np_=2, flags=flags, env=f"{env} UMA_MPI_PROBE={r}/probe.{tag}",
                     launch=f"-x LD_PRELOAD={PROBE} -x UMA_MPI_PROBE")
        if tag.startswith("balanced"):
            check("halo exchange on 2 ranks" in log, f"[{tag}] the run did not use the halo exchange")
        for rank, (calls, off_main, in_autograd, first) in enumerate(probe_counts(h, tag, 2)):
            check(calls > 100, f"[{tag}] rank {rank}: only {calls} MPI calls recorded")
            check(off_main == 0, f"[{tag}] rank {rank}: {off_main} of {calls} MPI calls off the main thread "
                                 f"(first: {first})")
            check(in_autograd == 0, f"[{tag}] rank {rank}: {in_autograd} of {calls} MPI calls from inside an "
                                    f"autograd pass (first: {first}); on a GPU they would run on LibTorch's "
                                    f"worker thread")
            print(f"  {tag}, rank {rank}: {calls} MPI calls, all on the main thread, none inside autograd")


def case_kokkos(h, r):
    """pair_style uma/kk through LAMMPS's KOKKOS package (OpenMP), picked by -sf kk:
    energy, virial, forces, per-atom energies and virials equal pair_style uma's
    one-rank values to 1e-10 (fp64) on 1 rank x 2 threads and 2 ranks x 1 thread
    (4 ranks: Cu, triclinic; newton off: Cu, molecule, NULL type), on orthogonal and
    triclinic Cu, a slab, a molecule and Cu with a NULL type; in place on the Kokkos views except newton off on several ranks; in the
    steady state no per-atom data crosses between host and model; NVE, NPT, minimize, a
    restart and a write_data/read_data round trip on 2 ranks (triclinic cell) follow uma's."""
    syms, mol = read_xyz(os.path.join(HERE, "..", "..", "examples", "structures", "ethanol_cation.extxyz"))
    write_molecule_data(os.path.join(h, "molecule.data"), syms, mol - mol.min(0) + 2.0, ["C", "O", "H"])
    systems = {
        "cu": ("boundary p p p\nlattice fcc 3.615\nregion box block 0 4 0 4 0 4\ncreate_box 1 box\n"
               "create_atoms 1 box\nmass 1 63.546\ndisplace_atoms all random 0.12 0.12 0.12 4242 units box\n",
               "Cu", "task omat"),
        "triclinic": ("boundary p p p\nlattice fcc 3.615\nregion box prism 0 3 0 3 0 3 1.1 -0.7 0.5\n"
                      "create_box 1 box\ncreate_atoms 1 box\nmass 1 63.546\n"
                      "displace_atoms all random 0.1 0.1 0.1 777 units box\n", "Cu", "task omat"),
        "slab": ("boundary p p f\nlattice fcc 3.615\nregion box block 0 3 0 3 -1 5\ncreate_box 1 box\n"
                 "region atoms block 0 3 0 3 0 3\ncreate_atoms 1 region atoms\nmass 1 63.546\n"
                 "displace_atoms all random 0.1 0.1 0.1 99 units box\n", "Cu", "task omat"),
        "molecule": (None, "C O H", "task omol charge 1 spin 2"),
        # a quarter of the atoms are of a type uma leaves to lj/cut: the engine's atoms are a
        # gather of LAMMPS's (hybrid/overlay/kk with uma/kk and lj/cut/kk)
        "null_type": ("boundary p p p\nlattice fcc 3.615\nregion box block 0 3 0 3 0 3\ncreate_box 2 box\n"
                      "create_atoms 1 box\nmass * 63.546\nset type 1 type/fraction 2 0.25 5\n"
                      "displace_atoms all random 0.1 0.1 0.1 4242 units box\n", "Cu NULL", "task omat"),
    }
    pair_lines = {name: f"pair_style uma {args} precision fp64\npair_coeff * * {MODEL} {elements}\n"
                  for name, (_, elements, args) in systems.items()}
    pair_lines["null_type"] = (f"pair_style hybrid/overlay uma task omat precision fp64 lj/cut 4.0\n"
                               f"pair_coeff * * uma {MODEL} Cu NULL\npair_coeff * 2 lj/cut 0.01 2.3\n")
    # every system on 1 rank x 2 threads and 2 ranks; 4 ranks and newton off where they add a case
    runs = {"cu": [(1, 2, "on"), (2, 1, "on"), (4, 1, "on"), (2, 1, "off")],
            "triclinic": [(1, 2, "on"), (2, 1, "on"), (4, 1, "on")],
            "slab": [(1, 2, "on"), (2, 1, "on")],
            "molecule": [(1, 2, "on"), (2, 1, "on"), (2, 1, "off")],
            "null_type": [(1, 2, "on"), (2, 1, "on"), (2, 1, "off")]}
    worst = 0.0
    for name, (build, elements, args) in systems.items():
        if build is not None:
            lammps(h, r, f"in.{name}_build", PRE.format(plugin=PLUGIN) + build + f"write_data {name}.data\n")
        boundary = "boundary s s s\n" if build is None else build.splitlines()[0] + "\n"
        text = PRE.format(plugin=PLUGIN) + "newton {newton}\n" + boundary + f"read_data {name}.data\n" + \
            pair_lines[name]
        tag = f"{name}_uma"
        ref = halo_results(h, tag, lammps(h, r, f"in.{tag}", text.format(newton="on") + HALO_OUT.format(tag=tag)))
        if name == "null_type":   # hybrid/overlay sizes its buffers from uma's halo rows (host style too)
            tag = f"{name}_uma_2"
            log = lammps(h, r, f"in.{tag}", text.format(newton="on") + HALO_OUT.format(tag=tag), np_=2)
            err = same_as_one_rank(halo_results(h, tag, log), ref, tag)
            print(f"  {name}: uma in hybrid/overlay on 2 ranks equals 1 rank (worst {err:.1e} relative)")
        for np_, threads, newton in runs[name]:
            tag = f"{name}_kk_{np_}x{threads}_{newton}"
            log = lammps(h, r, f"in.{tag}", text.format(newton=newton) + HALO_OUT.format(tag=tag), np_=np_,
                         flags=f"-k on t {threads} -sf kk")
            check("pair uma/kk: model" in log, f"[{tag}] -sf kk did not pick pair_style uma/kk")
            # newton off on several ranks folds ghost forces on the host; everything else runs in place
            in_place = np_ == 1 or newton == "on"
            check(("pair uma/kk: in place on the Kokkos views" in log) == in_place and
                  ("pair uma/kk: atoms go through the host" in log) != in_place,
                  f"[{tag}] expected the {'in-place' if in_place else 'host'} data path")
            err = same_as_one_rank(halo_results(h, tag, log), ref, tag)
            worst = max(worst, err)
            print(f"  {name}: uma/kk on {np_} rank(s) x {threads} thread(s), newton {newton}: equals uma "
                  f"(worst {err:.1e} relative)")
    print(f"  worst deviation of uma/kk from uma: {worst:.1e}")
    # The steady state in place: per step and rank, one read (the engine's
    # status and the energy compute pair asks for) and one upload (cell and
    # origin), plus, on 2 ranks, the halo exchange's 2 x layers of each
    # (owned rows out, ghost rows in, and back in the backward pass), the
    # same for uma and uma/kk.  pair_style uma also reads the forces and
    # uploads the positions; uma/kk does neither: its bytes per step are
    # uma's less at least 24 B per atom each way, and do not grow with the
    # atoms on one rank.  (compute pair sums the counts over the ranks.)
    per_step = {}
    for np_ in (1, 2):
        for cells in (3, 4):
            for kk in (False, True):
                text = PRE.format(plugin=PLUGIN) + \
                    CU_BOX.replace("0 3 0 3 0 3", f"0 {cells} 0 {cells} 0 {cells}").format(ntypes=1) + \
                    f"pair_style uma task omat precision fp64\npair_coeff * * {MODEL} Cu\n" \
                    "neigh_modify every 1000 delay 0 check no\nvelocity all create 300 4928 loop geom\n" \
                    "timestep 0.002\nfix 1 all nve\ncompute p all pair uma\n" \
                    "thermo_style custom step c_p[1] c_p[2] c_p[7] c_p[8]\nthermo 1\nrun 20\n"
                log = lammps(h, r, f"in.steady_{np_}_{cells}_{kk}", text, np_=np_,
                             flags="-k on t 1 -sf kk" if kk else "")
                if kk:
                    check("pair uma/kk: in place on the Kokkos views" in log,
                          f"steady state, {np_} rank(s): uma/kk not in place")
                rows = thermo(log)[1][1:]   # steps 1..20 (step 0 builds the layout)
                check(len(rows) == 20, f"steady state: {len(rows)} thermo rows, expected 20")
                seen = {tuple(row[c] for c in ("c_p[1]", "c_p[2]", "c_p[7]", "c_p[8]")) for row in rows}
                check(len(seen) == 1, f"steady state ({'uma/kk' if kk else 'uma'}, {np_} rank(s), "
                                      f"{4 * cells ** 3} atoms): transfers vary from step to step: {sorted(seen)}")
                per_step[np_, cells, kk] = seen.pop()
    for np_ in (1, 2):
        expected = np_ * (1 + (2 * 2 if np_ > 1 else 0))   # the tiny model has 2 layers
        for cells in (3, 4):
            n = 4 * cells ** 3
            kk_reads, kk_uploads, kk_read_bytes, kk_upload_bytes = per_step[np_, cells, True]
            reads, uploads, read_bytes, upload_bytes = per_step[np_, cells, False]
            where = f"{np_} rank(s), {n} atoms"
            check(kk_reads == expected and kk_uploads == expected and reads == expected and uploads == expected,
                  f"{where}: uma/kk {kk_reads:g} reads, {kk_uploads:g} uploads; uma {reads:g}, {uploads:g} "
                  f"(expected {expected} of each)")
            check(read_bytes - kk_read_bytes >= 24 * n and upload_bytes - kk_upload_bytes >= 24 * n,
                  f"{where}: uma/kk moves {kk_read_bytes:g} B / {kk_upload_bytes:g} B per step, uma "
                  f"{read_bytes:g} B / {upload_bytes:g} B: uma/kk still moves the forces or the positions")
        if np_ == 1:
            check(per_step[1, 4, True] == per_step[1, 3, True],
                  f"1 rank: uma/kk's transfers grow with the atoms: {per_step[1, 3, True]} with 108, "
                  f"{per_step[1, 4, True]} with 256")
        print(f"  steady state, {np_} rank(s), 20 NVE steps, 108 / 256 atoms: uma/kk reads "
              f"{per_step[np_, 3, True][2]:g} / {per_step[np_, 4, True][2]:g} B and uploads "
              f"{per_step[np_, 3, True][3]:g} / {per_step[np_, 4, True][3]:g} B per step; uma reads "
              f"{per_step[np_, 3, False][2]:g} / {per_step[np_, 4, False][2]:g} B and uploads "
              f"{per_step[np_, 3, False][3]:g} / {per_step[np_, 4, False][3]:g} B")
    # MD and minimization on 2 ranks follow pair_style uma's (Kokkos integrators and min styles),
    # on the skewed triclinic cell (108 atoms)
    base = PRE.format(plugin=PLUGIN) + "boundary p p p\nread_data triclinic.data\n" + \
        f"pair_style uma task omat precision fp64\npair_coeff * * {MODEL} Cu\n" + \
        "thermo_style custom step pe etotal press\nthermo_modify format float %.17g\n"
    jobs = {"nve": "velocity all create 600 4928 loop geom\ntimestep 0.002\nfix 1 all nve\nthermo 5\nrun 20\n",
            "npt": "velocity all create 600 4928 loop geom\ntimestep 0.002\n"
                   "fix 1 all npt temp 600 600 0.1 iso 0 0 0.5\nthermo 5\nrun 20\n",
            "minimize": "min_style cg\nthermo 1\nminimize 0 1e-8 8 100\n",
            # the second run starts from the restart file the first wrote, both under the same style
            "restart": "velocity all create 600 4928 loop geom\ntimestep 0.002\nfix 1 all nve\nthermo 5\n"
                       "run 10\nwrite_restart state.restart\nclear\n" + PRE.format(plugin=PLUGIN) +
                       "read_restart state.restart\n" + f"pair_style uma task omat precision fp64\n"
                       f"pair_coeff * * {MODEL} Cu\nfix 1 all nve\nthermo 5\n"
                       "thermo_style custom step pe etotal press\nthermo_modify format float %.17g\nrun 10\n",
            # the same through write_data / read_data (positions, velocities, box)
            "data": "velocity all create 600 4928 loop geom\ntimestep 0.002\nfix 1 all nve\nthermo 5\n"
                    "run 10\nwrite_data state.data\nclear\n" + PRE.format(plugin=PLUGIN) +
                    "read_data state.data\n" + f"pair_style uma task omat precision fp64\n"
                    f"pair_coeff * * {MODEL} Cu\ntimestep 0.002\nfix 1 all nve\nthermo 5\n"
                    "thermo_style custom step pe etotal press\nthermo_modify format float %.17g\nrun 10\n"}
    for job, cmds in jobs.items():
        rows = {}
        for kk in (False, True):
            log = lammps(h, r, f"in.{job}_{kk}", base + cmds, np_=2, flags="-k on t 1 -sf kk" if kk else "")
            rows[kk] = thermo(log)[1]
            if job in ("restart", "data"):
                check("pair uma/kk: model" in log.split(f"read_{job}")[-1] or not kk,
                      f"after read_{job}, -sf kk did not pick pair_style uma/kk")
        check(len(rows[True]) == len(rows[False]) >= 3, f"{job}: thermo rows differ: {len(rows[True])} vs {len(rows[False])}")
        for a, b in zip(rows[False], rows[True]):
            for col in ("PotEng", "TotEng", "Press"):
                close(b[col], a[col], 1e-10 * max(1.0, abs(a[col])), f"uma/kk {job} step {int(a['Step'])} {col}")
        print(f"  {job} on 2 ranks with uma/kk follows uma: {len(rows[True])} thermo rows equal to 1e-10")


def case_halo_md(h, r):
    """100 steps of NVE (fp64) on 2 ranks follow the one-rank trajectory to 1e-8,
    reneighboring (new ghost sets, atoms changing ranks) every 5 steps."""
    build = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=1) + \
        "velocity all create 600 4928 loop geom\nwrite_data md.data\n"
    lammps(h, r, "in.md_build", build)
    text = PRE.format(plugin=PLUGIN) + f"""boundary p p p
read_data md.data
pair_style uma task omat precision fp64
pair_coeff * * {MODEL} Cu
neigh_modify every 5 delay 0 check no
timestep 0.002
fix 1 all nve
thermo 10
thermo_style custom step pe ke etotal press
thermo_modify format float %.17g
run 100
write_dump all custom dump.{{tag}} id x y z vx vy vz modify format float %.17g sort id
"""
    runs = {}
    for np_ in (1, 2):
        log = lammps(h, r, f"in.md{np_}", text.format(tag=f"md{np_}"), np_=np_)
        _, rows = thermo(log)
        _, _, d = read_dump(os.path.join(h, f"dump.md{np_}"))
        runs[np_] = (rows, d)
    (rows1, d1), (rows2, d2) = runs[1], runs[2]
    check(len(rows1) == len(rows2) == 11, "expected thermo every 10 of 100 steps")
    for a, b in zip(rows1, rows2):
        for col in ("PotEng", "TotEng", "Press"):
            close(b[col], a[col], 1e-8 * max(1.0, abs(a[col])), f"2-rank NVE step {int(a['Step'])} {col}")
    x1 = np.stack([d1["x"], d1["y"], d1["z"]], 1)
    x2 = np.stack([d2["x"], d2["y"], d2["z"]], 1)
    err = close(x2, x1, 1e-8, "2-rank NVE positions after 100 steps")
    verr = close(np.stack([d2["vx"], d2["vy"], d2["vz"]], 1), np.stack([d1["vx"], d1["vy"], d1["vz"]], 1),
                 1e-8, "2-rank NVE velocities after 100 steps")
    print(f"  100 NVE steps on 2 ranks: positions within {err:.1e} A, velocities within {verr:.1e} A/ps "
          f"of one rank; energies within 1e-8 at every 10th step")


def case_composition(h, r):
    """set type, delete_atoms and create_atoms during a run: the experts are merged again."""
    text = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=2) + f"""pair_style uma task omat precision fp64
pair_coeff * * {MODEL} Cu Ni
""" + OUTPUT.format(tag="a") + """set type 1 type/fraction 2 0.3 99
run 0
undump d
dump d all custom 1 dump.b id type x y z fx fy fz c_pe c_sa[*]
dump_modify d format float %.15g sort id
run 0
undump d
delete_atoms random count 7 no all NULL 1234
create_atoms 2 single 1.8075 0 0 units box
dump d all custom 1 dump.c id type x y z fx fy fz c_pe c_sa[*]
dump_modify d format float %.15g sort id
run 0
"""
    for np_ in (1, 2):
        log = lammps(h, r, f"in.np{np_}", text, np_=np_)
        check(log.count("experts merged again") >= 2,
              f"expected two re-merges to be reported on {np_} ranks")
        runs = log.split("Loop time")
        for tag, part in (("b", "\n".join(runs[:3])), ("c", log)):
            syms, pos, cell, _ = dump_structure(h, tag, {1: "Cu", 2: "Ni"})
            ref = reference(h, r, syms, pos, cell, (True,) * 3, "--task omat --precision fp64")
            compare_to_reference(h, tag, part, ref, 1e-9, 1e-10)
        print(f"  composition changes on {np_} ranks: re-merged, match the engine")


MD_BASE = """boundary p p p
lattice fcc 3.615
region box block 0 3 0 3 0 3
create_box 1 box
create_atoms 1 box
mass 1 63.546
pair_style uma task omat
pair_coeff * * {model} Cu
velocity all create 300 4928 loop geom
timestep 0.001
thermo 5
thermo_style custom step temp pe ke etotal press vol
thermo_modify format float %.10g
"""


def case_md(h, r):
    """NVE drift over two runs, the same trajectory on 2 ranks, NPT, minimize."""
    nve = PRE.format(plugin=PLUGIN) + MD_BASE.format(model=MODEL) + "fix 1 all nve\nrun {n}\nrun {n}\n"
    log = lammps(h, r, "in.nve1", nve.format(n=50))
    _, rows = thermo(log)
    first = thermo(log.split("Loop time")[0])[1][0]
    drift = abs(rows[-1]["TotEng"] - first["TotEng"]) / 108
    spread = max(abs(x["TotEng"] - first["TotEng"]) for x in rows) / 108
    check(spread < 1e-4, f"NVE energy not conserved: {spread:.2e} eV/atom")
    print(f"  NVE 100 steps (two runs) on 1 rank: |dE| {drift:.2e} eV/atom, max {spread:.2e}")
    # on 2 ranks, reneighbor every step: atoms migrate, ghost sets change
    log2 = lammps(h, r, "in.nve2", nve.replace("fix 1 all nve", "neigh_modify every 1 delay 0 check no\nfix 1 all nve")
                  .format(n=10), np_=2)
    rows1 = {int(x["Step"]): x for x in thermo(log.split("Loop time")[0])[1]}
    for x in thermo(log2)[1]:
        for col in ("PotEng", "TotEng", "Press"):
            ref = rows1[int(x["Step"])][col]
            close(x[col], ref, 2e-5 * max(1.0, abs(ref)), f"2-rank MD step {int(x['Step'])} {col}")
    builds = re.findall(r"Neighbor list builds = (\d+)", log2)
    check(builds and int(builds[-1]) >= 10, "the 2-rank run did not reneighbor every step")
    print("  NVE on 2 ranks, reneighboring every step, follows the 1-rank trajectory (20 steps, two runs)")

    # NPT with the copper demo model: the barostat holds the target pressure.
    # Measured: mean 10000 bar over steps 200-400 (instantaneous spread 360 bar).
    log = lammps(h, r, "in.npt", PRE.format(plugin=PLUGIN) + MD_BASE.format(model=DEMO_MODEL) +
                 "thermo 1\nfix 1 all npt temp 300 300 0.1 iso 10000 10000 0.2\nrun 400\n")
    _, rows = thermo(log)
    press = [x["Press"] for x in rows if 200 <= int(x["Step"]) <= 400]
    vols = [x["Volume"] for x in rows]
    mean = sum(press) / len(press)
    check(len(press) == 201 and all(math.isfinite(v) for v in vols) and abs(mean - 10000) < 500,
          f"NPT: mean pressure {mean:.0f} bar over steps 200-400, target 10000 +- 500")
    print(f"  NPT (demo model, 10000 bar): mean pressure {mean:.0f} bar over steps 200-400; "
          f"volume {vols[0]:.2f} -> {vols[-1]:.2f} A^3")

    # minimize with the copper demo model (trained on EAM): a rattled crystal relaxes
    # back onto the perfect lattice, whose forces vanish by symmetry; the final
    # energy equals a plain evaluation of the perfect lattice.
    demo = (MD_BASE.format(model=DEMO_MODEL).replace("velocity all create 300 4928 loop geom\n", "")
            .replace("pair_style uma task omat", "pair_style uma task omat precision fp64"))
    perfect = lammps(h, r, "in.perfect", PRE.format(plugin=PLUGIN) + demo +
                     "thermo_modify format float %.12g\nrun 0\n")
    e_perfect = thermo(perfect)[0]["PotEng"]
    log = lammps(h, r, "in.min", PRE.format(plugin=PLUGIN) + demo +
                 "thermo_modify format float %.12g\ndisplace_atoms all random 0.1 0.1 0.1 9 units box\n"
                 "min_modify line quadratic\nminimize 0 1e-4 500 5000\n")
    m = re.search(r"Energy initial, next-to-last, final =\s*\n\s*(\S+)\s+(\S+)\s+(\S+)", log)
    f = re.search(r"Force two-norm initial, final = (\S+) (\S+)", log)
    check(m is not None and f is not None, "minimize printed no energies or forces")
    e0, e1, fnorm = float(m.group(1)), float(m.group(3)), float(f.group(2))
    check("Stopping criterion = force tolerance" in log and fnorm < 1e-4,
          f"minimize did not reach the force tolerance 1e-4 eV/A (final force norm {fnorm:.2e})")
    check(abs(e1 - e_perfect) < 1e-4,
          f"minimized energy {e1:.8f} eV is not the perfect lattice's {e_perfect:.8f} eV")
    print(f"  minimize (demo model): {e0:.6f} -> {e1:.8f} eV, force norm {fnorm:.1e} eV/A; "
          f"perfect lattice {e_perfect:.8f} eV")


def case_restart_data(h, r):
    """write_restart/read_restart and write_data/read_data give the same energy and forces."""
    first = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=1) + f"""pair_style uma task omat precision fp64
pair_coeff * * {MODEL} Cu
thermo_style custom step pe press
thermo_modify format float %.15g
run 0
write_restart state.restart
write_data state.data
"""
    restart = PRE.format(plugin=PLUGIN) + f"""read_restart state.restart
pair_style uma task omat precision fp64
pair_coeff * * {MODEL} Cu
thermo_style custom step pe press
thermo_modify format float %.15g
run 0
"""
    data = PRE.format(plugin=PLUGIN) + f"""boundary p p p
read_data state.data
pair_style uma task omat precision fp64
pair_coeff * * {MODEL} Cu
thermo_style custom step pe press
thermo_modify format float %.15g
run 0
"""
    t0, _ = thermo(lammps(h, r, "in.first", first))
    for name, text in (("restart", restart), ("data", data)):
        t, _ = thermo(lammps(h, r, "in." + name, text))
        close(t["PotEng"], t0["PotEng"], 1e-9 * abs(t0["PotEng"]), f"{name}: energy")
        close(t["Press"], t0["Press"], 1e-6 * max(1, abs(t0["Press"])), f"{name}: pressure")
        print(f"  read_{name}: same energy and pressure")


def case_plugin_path(h, r):
    """Loaded through LAMMPS_PLUGIN_PATH (no plugin command), and inside hybrid/overlay with a NULL type."""
    text = """units metal
atom_style atomic
boundary p p p
lattice fcc 3.615
region box block 0 3 0 3 0 3
create_box 2 box
create_atoms 1 box
mass * 63.546
set type 1 type/fraction 2 0.25 5
displace_atoms all random 0.1 0.1 0.1 4242 units box
pair_style hybrid/overlay uma task omat precision fp64 lj/cut 4.0
pair_coeff * * uma {model} Cu NULL
pair_coeff * 2 lj/cut 0.01 2.3
compute pu all pair uma
compute pl all pair lj/cut
thermo_style custom step pe c_pu c_pl
thermo_modify format float %.15g
dump d all custom 1 dump.h id type x y z fx fy fz
dump_modify d format float %.15g sort id
run 0
""".format(model=MODEL)
    log = lammps(h, r, "in.hybrid", text, env=f"LAMMPS_PLUGIN_PATH={SRC}/build-root")
    t, _ = thermo(log)
    syms, pos, cell, d = dump_structure(h, "h", {1: "Cu", 2: "X"})
    keep = d["type"] == 1
    ref = reference(h, r, [s for s, k in zip(syms, keep) if k], pos[keep], cell, (True,) * 3,
                    "--task omat --precision fp64")
    close(t["c_pu"], ref["energy"], 1e-10 * abs(ref["energy"]), "uma part of hybrid/overlay (NULL type skipped)")
    # The rest is lj/cut (epsilon 0.01, sigma 2.3, cutoff 4) on every pair
    # with a type-2 atom, written out here: its energy is c_pl, and LAMMPS's
    # forces are the engine's on the uma atoms (zero on the NULL ones) plus it.
    e_lj, f_lj = lennard_jones(pos, d["type"] == 2, cell, 0.01, 2.3, 4.0)
    close(t["c_pl"], e_lj, 1e-10 * max(1.0, abs(e_lj)), "lj/cut part of hybrid/overlay vs a direct sum")
    f_uma = np.zeros_like(pos)
    f_uma[keep] = np.array(ref["forces"]).reshape(-1, 3)
    forces = np.stack([d["fx"], d["fy"], d["fz"]], 1)
    close(forces, f_uma + f_lj, 1e-9, "hybrid/overlay forces = the engine's on the uma atoms + lj/cut's")
    print(f"  LAMMPS_PLUGIN_PATH load; hybrid/overlay with NULL type: the uma part equals the engine on the "
          f"{int(keep.sum())} mapped atoms, the rest a direct lj/cut sum, forces included")


def lennard_jones(pos, is_b, cell, eps, sigma, rc):
    """lj/cut (unshifted) over pairs with at least one `is_b` atom, orthogonal
    periodic cell, minimum image (rc under half the box): energy, forces."""
    n = len(pos)
    box = np.diag(cell)
    e, f = 0.0, np.zeros((n, 3))
    for i in range(n):
        d = pos[i + 1:] - pos[i]
        d -= box * np.round(d / box)
        r2 = (d * d).sum(1)
        use = (r2 < rc * rc) & (is_b[i] | is_b[i + 1:])
        sr6 = (sigma * sigma / r2[use]) ** 3
        e += (4 * eps * (sr6 * sr6 - sr6)).sum()
        # force on j from i: 24 eps (2 sr12 - sr6) / r^2 * d
        fj = (24 * eps * (2 * sr6 * sr6 - sr6) / r2[use])[:, None] * d[use]
        idx = np.nonzero(use)[0] + i + 1
        np.add.at(f, idx, fj)
        f[i] -= fj.sum(0)
    return e, f


def case_errors(h, r):
    """Bad input: each gives a clear LAMMPS error."""
    open(os.path.join(h, "corrupt.safetensors"), "wb").write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    box = CU_BOX.format(ntypes=1)
    head = PRE.format(plugin=PLUGIN) + box
    # (name, pair commands after the Cu box, what the error must say)
    cases = [
        ("missing", "pair_style uma task omat\npair_coeff * * /no/such.safetensors Cu",
         "cannot load model file '/no/such.safetensors'"),
        ("corrupt", "pair_style uma task omat\npair_coeff * * corrupt.safetensors Cu",
         "cannot load model file 'corrupt.safetensors'"),
        ("symbol", f"pair_style uma task omat\npair_coeff * * {MODEL} Qq", "'Qq' (type 1) is not an element symbol"),
        ("element", f"pair_style uma task omat\npair_coeff * * {MODEL} Og", "element Og (type 1) is not in the model"),
        ("count", f"pair_style uma task omat\npair_coeff * * {MODEL} Cu Ni",
         "expected '* * MODEL' and 1 element symbols or NULL"),
        ("task", f"pair_style uma task omatt\npair_coeff * * {MODEL} Cu\nrun 0", "unknown task 'omatt'; the model has: "),
        ("notask", f"pair_style uma\npair_coeff * * {MODEL} Cu\nrun 0", "choose one with 'pair_style uma task NAME'"),
        ("charge", f"pair_style uma task omat charge 1\npair_coeff * * {MODEL} Cu\nrun 0",
         "task 'omat' takes no charge or spin input"),
        ("spin", f"pair_style uma task oc20 spin 2\npair_coeff * * {MODEL} Cu\nrun 0",
         "task 'oc20' takes no charge or spin input"),
        ("keyword", "pair_style uma task omat cutoff 5", "unknown keyword 'cutoff'"),
        ("precision", "pair_style uma precision fp16", "precision must be fp32, fp64 or tf32"),
        ("memory", "pair_style uma task omat memory -2", "memory is a budget in GB and must be positive"),
        ("tiny_memory", f"pair_style uma task omat memory 1e-6\npair_coeff * * {MODEL} Cu\nrun 0",
         "even when recomputed in chunks, but the memory budget is"),
        ("tf32", f"pair_style uma task omat precision tf32 device cpu\npair_coeff * * {MODEL} Cu\nrun 0",
         "precision tf32 needs a CUDA device"),
        ("wildcard", f"pair_style uma task omat\npair_coeff 1 1 {MODEL} Cu", "must start with * *"),
        ("coincident", f"pair_style uma task omat\npair_coeff * * {MODEL} Cu\n"
         "create_atoms 1 single 0.3 0.2 0.1 units box\ncreate_atoms 1 single 0.3 0.2 0.1 units box\nrun 0",
         "atoms with IDs 109 and 110 are 0 A apart, closer than the 0.01 A minimum"),
        ("close", f"pair_style uma task omat\npair_coeff * * {MODEL} Cu\n"
         "create_atoms 1 single 0.3 0.2 0.1 units box\ncreate_atoms 1 single 0.3 0.2 0.105 units box\nrun 0",
         "atoms with IDs 109 and 110 are 0.005 A apart, closer than the 0.01 A minimum"),
        ("all_null", f"pair_style uma task omat\npair_coeff * * {MODEL} NULL", "every type is NULL"),
        ("charge_range", f"pair_style uma task omol charge 101\npair_coeff * * {MODEL} Cu\nrun 0",
         "charge 101 is outside -100..100"),
    ]
    cases = [(name, head + cmds + "\n", msg) for name, cmds, msg in cases]
    cases.append(("version", f"plugin load {SRC}/build-root/umaplugin_wrong_version.so\n",
                  "was built for LAMMPS '1 Jan 2000' but this is LAMMPS '4 Jul 2026'"))
    cases.append(("kokkos_backend", f"plugin load {SRC}/build-root/umaplugin_wrong_kokkos.so\n",
                  "was built for a KOKKOS package with the cuda backend in double precision"))
    cases.append(("kokkos_layout", f"plugin load {SRC}/build-root/umaplugin_wrong_layout.so\n",
                  "was built for KOKKOS views in the 'default' layout, and this LAMMPS's KOKKOS uses another"))
    cases.append(("units", PRE.replace("units metal", "units real").format(plugin=PLUGIN) + box +
                  f"pair_style uma task omat\npair_coeff * * {MODEL} Cu\nrun 0\n", "requires 'units metal'"))
    for name, text, msg in cases:
        out = lammps(h, r, "in." + name, text, fail=True)
        check(msg in out, f"{name}: expected the error to say \"{msg}\"; got:\n{out[-1500:]}")
        print(f"  {name}: refused with \"{msg}\"")
    # The multi-rank (local) path refuses the same, naming the atoms by ID.
    # (Non-finite positions never reach a pair style: LAMMPS stops with "Non-numeric
    # atom coords" first; the engine's own check is BadStructure.LocalPiecesToo.)
    for name in ("close",):
        text, msg = next((t, m) for n, t, m in cases if n == name)
        out = lammps(h, r, f"in.{name}_2ranks", text, np_=2, fail=True)
        check(msg in out, f"{name} on 2 ranks: expected the error to say \"{msg}\"; got:\n{out[-1500:]}")
        print(f"  {name} on 2 ranks: refused with \"{msg}\"")


def case_gpu_path(h, r):
    """One CUDA-capable LibTorch (the torch wheel's) in the plugin; device cuda
    refused cleanly without a GPU; the per-step transfer budget through
    `compute pair`: 1 upload and 1 packed read per MD step on 1 rank, and
    1 + 2 x layers of each per rank on several (the halo exchange), between
    reneighborings."""
    p = in_root(f"ldd {PLUGIN}")
    check(p.returncode == 0, "ldd umaplugin.so failed: " + p.stderr)
    libs = {l.split()[0]: l.split()[2] if "=>" in l else "" for l in p.stdout.splitlines() if l.strip()}
    for lib in ("libtorch_cuda.so", "libc10_cuda.so", "libtorch_cpu.so"):
        check(lib in libs, f"umaplugin.so does not link {lib}:\n{p.stdout}")
        check(libs[lib].startswith("/opt/torch/site-packages/torch/lib/"),
              f"{lib} resolves to '{libs[lib]}', not the torch wheel in /opt/torch")
    check(not any("not found" in l for l in p.stdout.splitlines()), "unresolved libraries:\n" + p.stdout)
    print("  umaplugin.so links the torch wheel's libtorch_cuda, libc10_cuda and libtorch_cpu")

    head = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=1)
    text = head + f"pair_style uma task omat device cuda\npair_coeff * * {MODEL} Cu\nrun 0\n"
    if os.path.exists("/dev/nvidia0"):
        compare_devices(h, r, "cpu", "cuda")
    else:
        for device in ("cuda", "cuda:0"):   # cuda:N is accepted by the keyword, then checked against the GPUs
            out = lammps(h, r, "in.cuda", text.replace("device cuda", f"device {device}"), fail=True)
            msg = f"device {device} requested, but LibTorch sees no CUDA device"
            check(msg in out and "ERROR" in out, f"device {device} without a GPU: expected \"{msg}\"; got:\n{out[-1500:]}")
            print(f"  device {device} without a GPU: refused with \"{msg}\"")

    budget = head + f"""pair_style uma task omat
pair_coeff * * {MODEL} Cu
velocity all create 300 5 loop geom
neigh_modify every 20 delay 0 check no
fix 1 all nve
compute pu all pair uma
thermo_style custom step pe c_pu[1] c_pu[2] c_pu[3] c_pu[4]
thermo {{every}}
run 0
run 10
"""
    # 1 rank: exactly the budget.  Several ranks: besides the packed read and
    # the positions' upload, each halo exchange reads the owned atoms' rows
    # and uploads the ghosts' rows, and its backward reads the ghosts'
    # gradients and uploads the owners' sums: 2 x layers (2 for the tiny
    # model) more of each per rank and step.  The ghosts change only when
    # LAMMPS reneighbors (every 20 steps), so no step between costs more.
    # compute pair sums the values over ranks.
    per_rank = 1 + 2 * 2
    for every in (1, 5):
        log = lammps(h, r, f"in.budget2_{every}", budget.format(every=every), np_=2)
        last, rows = thermo(log)
        for x in rows[1:]:   # after the set-up
            check(x["c_pu[1]"] == 2 * per_rank and x["c_pu[2]"] == 2 * per_rank,
                  f"2 ranks, thermo {every}, step {int(x['Step'])}: {x['c_pu[1]']:g} reads and "
                  f"{x['c_pu[2]']:g} uploads over both ranks (expected {2 * per_rank} of each)")
        check(last["c_pu[3]"] - rows[0]["c_pu[1]"] == 10 * 2 * per_rank and
              last["c_pu[4]"] - rows[0]["c_pu[2]"] == 10 * 2 * per_rank,
              f"2 ranks, thermo {every}: reads and uploads over 10 steps")
    print(f"  2 ranks: {per_rank} reads and {per_rank} uploads per rank and step (1 + 2 per halo exchange)")
    # 1 rank: the budget exactly, in both runs.  `run 0` builds the layout
    # (its counts are the first evaluation's); `run 10` starts from a set-up
    # that reneighbors but keeps the layout, so every one of its evaluations,
    # the set-up included, costs 1 read and 1 upload.
    for every in (1, 5):
        first, second = thermo_runs(lammps(h, r, f"in.budget1_{every}", budget.format(every=every)))
        check(len(first) == 1 and int(first[0]["Step"]) == 0, f"run 0: thermo rows {first}")
        # run 0's one evaluation: the totals (counted from each run's start) are its own counts
        check(first[0]["c_pu[3]"] == first[0]["c_pu[1]"] >= 1 and first[0]["c_pu[4]"] == first[0]["c_pu[2]"] >= 1,
              f"run 0: {first[0]['c_pu[1]']:g} reads and {first[0]['c_pu[2]']:g} uploads, totals "
              f"{first[0]['c_pu[3]']:g} and {first[0]['c_pu[4]']:g}")
        setup, last = second[0], second[-1]
        check(int(setup["Step"]) == 0 and int(last["Step"]) == 10 and len(second) == 1 + 10 // every,
              f"run 10, thermo {every}: steps {[int(x['Step']) for x in second]}")
        for x in second:
            check(x["c_pu[1]"] == 1 and x["c_pu[2]"] == 1,
                  f"1 rank, thermo {every}, step {int(x['Step'])}: {x['c_pu[1]']:g} reads and "
                  f"{x['c_pu[2]']:g} uploads (expected 1 and 1)")
        # run 10's totals: one of each per evaluation (its set-up and 10 steps), the steps
        # without thermo output included
        check(setup["c_pu[3]"] == 1 and last["c_pu[3]"] == 11 and setup["c_pu[4]"] == 1 and last["c_pu[4]"] == 11,
              f"1 rank, thermo {every}: run 10's totals {setup['c_pu[3]']:g} / {last['c_pu[3]']:g} reads and "
              f"{setup['c_pu[4]']:g} / {last['c_pu[4]']:g} uploads after its set-up and at its end (expected 1 / 11)")
    print(f"  1 rank: run 0 (a new layout) {first[0]['c_pu[3]']:g} reads and {first[0]['c_pu[4]']:g} uploads; "
          f"then 1 read and 1 upload per evaluation: run 10's set-up and each of its steps "
          f"(thermo every step and every 5 steps)")


def compare_devices(h, r, device_a, device_b):
    """The same fp64 input on two devices: run 0's energy, virial and forces to
    1e-10 (relative to each quantity's largest value), then 100 NVE steps
    whose thermo rows agree to 1e-8 and whose energy drift on device_b is
    within 2x device_a's plus 1e-6 eV/atom."""
    results = {}
    for device in (device_a, device_b):
        tag = f"dev_{device}"
        text = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=1) + \
            f"pair_style uma task omat precision fp64 device {device}\npair_coeff * * {MODEL} Cu\n" \
            "thermo_style custom step pe etotal press pxx pyy pzz pxy pxz pyz\nthermo_modify format float %.17g\n" \
            f"dump d all custom 100 dump.{tag} id fx fy fz\ndump_modify d format float %.17g sort id\n" \
            "run 0\nvelocity all create 300 4928 loop geom\ntimestep 0.001\nfix 1 all nve\nthermo 10\nrun 100\n"
        log = lammps(h, r, f"in.{tag}", text)
        check(f"fp64 on {device}" in log, f"[{tag}] the log does not say the model runs in fp64 on {device}")
        lines = open(os.path.join(h, "dump." + tag)).read().splitlines()
        n = int(lines[3])
        forces = np.array([[float(v) for v in l.split()[1:4]] for l in lines[9:9 + n]])   # run 0's snapshot
        results[device] = thermo_runs(log), forces, n
    (runs_a, f_a, n), (runs_b, f_b, _) = results[device_a], results[device_b]
    scale = lambda x: max(1e-300, np.abs(x).max())
    row_a, row_b = runs_a[0][0], runs_b[0][0]
    press = ("Pxx", "Pyy", "Pzz", "Pxy", "Pxz", "Pyz")
    close(row_b["PotEng"] / abs(row_a["PotEng"]), row_a["PotEng"] / abs(row_a["PotEng"]), 1e-10,
          f"run 0 energy, {device_b} vs {device_a} (relative)")
    pa, pb = np.array([row_a[k] for k in press]), np.array([row_b[k] for k in press])
    close(pb / scale(pa), pa / scale(pa), 1e-10, f"run 0 virial, {device_b} vs {device_a} (relative)")
    close(f_b / scale(f_a), f_a / scale(f_a), 1e-10, f"run 0 forces, {device_b} vs {device_a} (relative)")
    md_a, md_b = runs_a[1], runs_b[1]
    check(len(md_a) == len(md_b) == 11, f"NVE thermo rows: {len(md_a)} and {len(md_b)}")
    for a, b in zip(md_a, md_b):
        for col in ("PotEng", "TotEng", "Press"):
            close(b[col], a[col], 1e-8 * max(1.0, abs(a[col])), f"NVE step {int(a['Step'])} {col}, {device_b} vs {device_a}")
    drift = {d: abs(rows[-1]["TotEng"] - rows[0]["TotEng"]) / n for d, rows in ((device_a, md_a), (device_b, md_b))}
    check(drift[device_b] <= 2 * drift[device_a] + 1e-6,
          f"NVE drift over 100 steps: {drift[device_b]:.2e} eV/atom on {device_b}, {drift[device_a]:.2e} on {device_a}")
    print(f"  device {device_b} vs {device_a}, fp64: run 0 energy, virial and forces equal to 1e-10; 100 NVE steps "
          f"equal to 1e-8; drift {drift[device_b]:.2e} eV/atom ({device_a}: {drift[device_a]:.2e})")


def case_examples(h, r):
    """Every input in examples/ runs as shipped (plugin from LAMMPS_PLUGIN_PATH), with finite thermo; cu_otf
    also under -k on t 1 -sf kk (uma/kk in place).
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
                                  ("cu_otf", "in.cu_otf", 2, "-var steps 20 -k on t 1 -sf kk")):
        d = f"{SRC}/examples/{sub}"
        p = in_root(f"cd {d} && LAMMPS_PLUGIN_PATH={SRC}/build-root LAMMPS_POTENTIALS=/opt/lammps/share/lammps/potentials "
                    f"OMP_NUM_THREADS=1 mpirun --oversubscribe -np {np_} /opt/lammps/bin/lmp -in {name} {extra} "
                    f"-log /tmp/uma-pair/examples/log.{sub} -screen none")
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
    "ranks": case_ranks, "triclinic": case_triclinic, "molecule": case_molecule,
    "balanced_model": case_balanced_model, "halo": case_halo, "halo_md": case_halo_md, "kokkos": case_kokkos, "empty_ranks": case_empty_ranks, "composition": case_composition, "md": case_md,
    "restart_data": case_restart_data, "examples": case_examples, "plugin_path": case_plugin_path, "errors": case_errors,
    "gpu_path": case_gpu_path, "memory": case_memory, "ghost_cutoff": case_ghost_cutoff,
    "mpi_threads": case_mpi_threads,
}


def run_case(doc, cases, argv, prefix=""):
    """Runs the case named on the command line (ROOT CASE); prints PASS/FAIL."""
    global ROOT
    if len(argv) != 3 or argv[2] not in cases:
        sys.exit(doc + "cases: " + " ".join(cases))
    ROOT = argv[1]
    case = argv[2]
    check(os.path.exists(ROOT + PLUGIN), f"{PLUGIN} is not built in the root (lammps.engine_in_root builds it)")
    h, r = workdir(prefix + case)
    try:
        cases[case](h, r)
    except Failure as e:
        print(f"FAIL {case}: {e}")
        sys.exit(1)
    print(f"PASS {case}")


def main():
    run_case(__doc__, CASES, sys.argv)


if __name__ == "__main__":
    main()
