"""pair_style uma's device path: the CUDA-capable LibTorch, device cuda, the transfer budget per step.

CASES: name -> case(host_dir, root_dir), run by run_case.py (each a ctest, lammps.pair_uma.NAME).
"""
import os

import numpy as np

from harness import CU_BOX, MODEL, PLUGIN, PRE, TORCH_LIB, check, close, in_root, lammps, thermo, thermo_runs


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
        check(libs[lib].startswith(TORCH_LIB + "/"),
              f"{lib} resolves to '{libs[lib]}', not the torch wheel in {TORCH_LIB}")
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


CASES = {
    "gpu_path": case_gpu_path,
}
