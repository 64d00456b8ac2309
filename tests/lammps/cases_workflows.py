"""The workflows LAMMPS users run with a machine-learned potential, through pair_style uma.

rerun of a dump, fix box/relax + minimize, Monte Carlo swaps (fix atom/swap), GCMC (fix gcmc
full_energy), NEB over partitions, LAMMPS's Python module and ASE's LAMMPSlib.  The MC, GCMC,
NEB and Python cases run the shipped examples (examples/mc_cuni_swap, gcmc_ar_cu,
neb_cu_vacancy, python_ase) with shorter settings.  Every energy and force compared is fp64
and compared with `uma eval` of the same configuration (a fresh evaluation, no LAMMPS).

CASES: name -> case(host_dir, root_dir), run by run_case.py (each a ctest, lammps.pair_uma.NAME).
"""
import json
import os
import re

import numpy as np

from harness import (BUILD, DEMO_MODEL, LAMMPS, MODEL, PLUGIN, PRE, SRC, UMA, Failure, cell_from_dump, check,
                     close, in_root, lammps, thermo, thermo_runs)

ROOT = None   # the sid root on the host (harness.run_case sets it)
SYMBOLS = {1: "Cu", 2: "Ni"}
# 108 Cu atoms on the fcc lattice (3x3x3 cells), the demo model in fp64
CU108 = f"""boundary p p p
lattice fcc 3.615
region box block 0 3 0 3 0 3
create_box 1 box
create_atoms 1 box
mass 1 63.546
pair_style uma task omat precision fp64
pair_coeff * * {DEMO_MODEL} Cu
"""


def runs_of(log):
    """thermo_runs without the pair style's own lines (a re-merge note may fall between thermo rows)."""
    return thermo_runs("\n".join(l for l in log.splitlines() if not l.startswith("pair uma")))


def dump_frames(path):
    """Every snapshot of a custom dump: [(timestep, cell, {column: values sorted by id})]."""
    lines = open(path).read().splitlines()
    frames, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("ITEM: TIMESTEP"):
            i += 1
            continue
        step, n = int(lines[i + 1]), int(lines[i + 3])
        bounds = lines[i + 4].split()[3:]
        box = np.array([[float(v) for v in lines[i + 5 + k].split()] for k in range(3)])
        cols = lines[i + 8].split()[2:]
        data = np.array([[float(v) for v in l.split()] for l in lines[i + 9:i + 9 + n]]).reshape(n, len(cols))
        data = data[np.argsort(data[:, cols.index("id")])]
        frames.append((step, cell_from_dump(box, bounds), {c: data[:, k] for k, c in enumerate(cols)}))
        i += 9 + n
    check(frames, f"no snapshots in {path}")
    return frames


def evaluate_frames(host_dir, root_dir, frames, symbols, args, model, pbc=(True, True, True), name="frames"):
    """`uma eval` of every frame (one call, one extxyz of all frames): the list of its JSON results."""
    with open(os.path.join(host_dir, name + ".extxyz"), "w") as f:
        for _, cell, d in frames:
            pos = np.stack([d["x"], d["y"], d["z"]], 1)
            f.write(f"{len(pos)}\n")
            lat = " ".join(f"{v:.17g}" for v in np.asarray(cell).reshape(-1))
            pb = " ".join("T" if p else "F" for p in pbc)
            f.write(f'Lattice="{lat}" Properties=species:S:1:pos:R:3 pbc="{pb}"\n')
            for t, p in zip(d["type"], pos):
                f.write(f"{symbols[int(t)]} {p[0]:.17g} {p[1]:.17g} {p[2]:.17g}\n")
    p = in_root(f"OMP_NUM_THREADS=2 {UMA} eval {model} {root_dir}/{name}.extxyz --json {args}")
    if p.returncode != 0:
        raise Failure("uma eval failed: " + p.stderr[-2000:])
    out = json.loads(p.stdout)
    check(len(out) == len(frames), f"uma eval gave {len(out)} frames for {len(frames)}")
    return out


def run_example(host_dir, root_dir, sub, name, np_=1, variables="", flags=""):
    """An examples/SUB input as shipped, from its folder (LAMMPS_PLUGIN_PATH finds the plugin),
    with its log and outputs in the case's work folder; returns the log."""
    d = f"{SRC}/examples/{sub}"
    p = in_root(f"cd {root_dir} && cp -r {d}/. . && LAMMPS_PLUGIN_PATH={BUILD} OMP_NUM_THREADS=1 "
                f"mpirun --oversubscribe -np {np_} {LAMMPS}/bin/lmp {flags} -in {name} "
                f"-var model {DEMO_MODEL} {variables} -log log.{name} -screen none")
    path = os.path.join(host_dir, "log." + name)
    log = open(path).read() if os.path.exists(path) else ""
    if p.returncode != 0:
        raise Failure(f"examples/{sub}/{name} failed (rc {p.returncode}):\n{log[-3000:]}\n{p.stderr[-2000:]}")
    return log


def modify_seconds(log):
    """The last run's Modify time (s) from LAMMPS's timing breakdown."""
    m = re.findall(r"^Modify\s*\|\s*([\d.eE+-]+)", log, re.M)
    return float(m[-1]) if m else float("nan")


def case_workflow_rerun(h, r):
    """rerun of a dump of an MD run gives, frame by frame, the energy and forces of `uma eval` of that frame
    (fp64, the demo model, 108 Cu atoms at 600 K, 5 frames), with uma on 1 and 2 ranks and with uma/kk (-sf kk)."""
    md = PRE.format(plugin=PLUGIN) + CU108 + f"""velocity all create 600.0 87287 loop geom
timestep 0.002
fix 1 all nve
dump d all custom 10 dump.md id type x y z
dump_modify d sort id format float %.17g
run 40
"""
    lammps(h, r, "in.md", md)
    frames = dump_frames(os.path.join(h, "dump.md"))
    check(len(frames) == 5, f"{len(frames)} frames in dump.md, expected 5")
    ref = evaluate_frames(h, r, frames, SYMBOLS, "--task omat --precision fp64", DEMO_MODEL)
    for style, flags, np_ in (("uma", "", 1), ("uma/kk", "-k on t 1 -sf kk", 1), ("uma", "", 2)):
        tag = style.replace("/", "_") + f"_{np_}"
        rerun = PRE.format(plugin=PLUGIN) + f"""boundary p p p
region box block 0 10.845 0 10.845 0 10.845 units box
create_box 1 box
mass 1 63.546
pair_style uma task omat precision fp64
pair_coeff * * {DEMO_MODEL} Cu
thermo 1
thermo_style custom step pe press
thermo_modify format float %.15g
dump f all custom 1 dump.rerun_{tag} id type x y z fx fy fz
dump_modify f sort id format float %.17g
rerun dump.md dump x y z box yes add yes
"""
        log = lammps(h, r, f"in.rerun_{tag}", rerun, flags=flags, np_=np_)
        if flags:
            check("pair uma/kk" in log, "the rerun under -sf kk did not use uma/kk")
        rows = runs_of(log)[-1]
        got = dump_frames(os.path.join(h, f"dump.rerun_{tag}"))
        check([int(x["Step"]) for x in rows] == [f[0] for f in frames], f"[{style}] rerun steps differ from the dump's")
        worst_e = worst_f = 0.0
        for row, g, ref_frame in zip(rows, got, ref):
            e = ref_frame["energy"]
            worst_e = max(worst_e, close(row["PotEng"], e, 1e-10 * abs(e), f"[{style}] rerun energy, step {row['Step']:.0f}"))
            forces = np.stack([g[2]["fx"], g[2]["fy"], g[2]["fz"]], 1)
            worst_f = max(worst_f, close(forces, np.reshape(ref_frame["forces"], (-1, 3)), 1e-9,
                                         f"[{style}] rerun forces, step {row['Step']:.0f}"))
        print(f"  rerun with {style} on {np_} rank(s): {len(rows)} frames; energy within {worst_e:.1e} eV, forces {worst_f:.1e} eV/A "
              f"of uma eval")


def case_workflow_box_relax(h, r):
    """fix box/relax iso 0 + minimize from a cell strained by -1% reaches the model's zero-stress lattice
    constant, the minimum of a scan of run 0 energies E(a) (fp64, the demo model, 108 Cu atoms), on 1 and 2 ranks."""
    scan = PRE.format(plugin=PLUGIN) + CU108 + f"""thermo_style custom step pe press vol
thermo_modify format float %.15g
variable i loop 9
label scan
variable a equal 3.58+0.01*(v_i-1)
variable L equal 3*v_a
change_box all x final 0 ${{L}} y final 0 ${{L}} z final 0 ${{L}} remap units box
run 0
print "SCAN ${{a}} $(pe:%.15g)"
next i
jump SELF scan
"""
    log = lammps(h, r, "in.scan", scan)
    points = np.array([[float(v) for v in l.split()[1:3]] for l in log.splitlines() if l.startswith("SCAN ")])
    check(len(points) == 9, f"{len(points)} scan points, expected 9")
    k = int(np.argmin(points[:, 1]))
    check(2 <= k <= 6, f"the scan's minimum lies at its edge (a = {points[k, 0]:.3f} A)")
    c = np.polyfit(points[k - 2:k + 3, 0], points[k - 2:k + 3, 1], 4)   # around the minimum
    roots = [x.real for x in np.roots(np.polyder(c)) if abs(x.imag) < 1e-12 and
             points[k - 2, 0] <= x.real <= points[k + 2, 0]]
    check(len(roots) == 1, f"no single minimum of the fitted E(a): {roots}")
    a_scan = roots[0]
    relax = PRE.format(plugin=PLUGIN) + CU108.replace("lattice fcc 3.615", "lattice fcc 3.5903") + f"""thermo 10
thermo_style custom step pe press vol lx
thermo_modify format float %.15g
fix relax all box/relax iso 0.0 vmax 0.001
min_style cg
minimize 0.0 1e-8 2000 20000
"""
    for np_ in (1, 2):
        log = lammps(h, r, "in.relax", relax, np_=np_)
        last, _ = thermo(log)
        a_relax = last["Lx"] / 3
        check(abs(last["Press"]) < 5.0, f"box/relax on {np_} rank(s) ended at {last['Press']:.2f} bar")
        close(a_relax, a_scan, 2e-4, f"relaxed lattice constant on {np_} rank(s) vs the E(a) scan's minimum")
    print(f"  box/relax (1 and 2 ranks): a = {a_relax:.5f} A at {last['Press']:.2f} bar from 3.5903 A; scan minimum "
          f"{a_scan:.5f} A (9 run 0 points, 3.58-3.66 A); {last['Step']:.0f} minimizer iterations")


def swap_run(h, r, semigrand, kokkos=False, np_=1):
    # 32 atoms (2x2x2 cells): every move is an evaluation of the whole system, and the
    # property (energies after accepted and rejected moves) does not need more
    variables = f"-var precision fp64 -var steps 8 -var every 1 -var swaps 4 -var cells 2 -var semigrand {semigrand}"
    log = run_example(h, r, "mc_cuni_swap", "in.mc_cuni_swap", variables=variables, np_=np_,
                      flags="-k on t 1 -sf kk" if kokkos else "")
    rows = runs_of(log)[-1]
    frames = dump_frames(os.path.join(h, "dump.mc"))
    check([int(x["Step"]) for x in rows] == [f[0] for f in frames], "thermo and dump steps differ")
    ref = evaluate_frames(h, r, frames, SYMBOLS, "--task omat --precision fp64", DEMO_MODEL)
    worst = 0.0
    for row, e in zip(rows, ref):
        worst = max(worst, close(row["PotEng"], e["energy"], 1e-10 * abs(e["energy"]),
                                 f"energy after the Monte Carlo step at step {row['Step']:.0f}"))
    for row, (_, _, d) in zip(rows, frames):   # the composition LAMMPS reports is the configuration's
        check(row["c_ni[2]"] == np.sum(d["type"] == 2), f"step {row['Step']:.0f}: Ni count differs from the dump")
    return log, rows, worst


def case_workflow_atom_swap(h, r):
    """fix atom/swap (examples/mc_cuni_swap with 32 Cu/Ni atoms, fp64, a swap step every MD step): after
    every Monte Carlo step, accepted or rejected moves, the style's energy equals `uma eval` of the
    configuration; in semi-grand mode the composition changes (the experts merged again) and the energies
    still agree, on 1 and 2 ranks; also under -sf kk, where uma/kk takes the host path (its in-place layout is rebuilt only
    when LAMMPS reneighbors; fix atom/swap changes types between).  Prints the time per attempted move."""
    for semigrand, kokkos, np_ in (("no", False, 1), ("yes", False, 1), ("no", True, 1), ("yes", False, 2)):
        log, rows, worst = swap_run(h, r, semigrand, kokkos, np_)
        if kokkos:   # the in-place path reads types once per reneighboring: the host path instead
            check("pair uma/kk: atoms go through the host each step (fix atom/swap changes atoms on the host" in log,
                  "under -sf kk with fix atom/swap, uma/kk did not take the host path")
        attempts, accepted = rows[-1]["f_mc[1]"], rows[-1]["f_mc[2]"]
        check(0 < accepted < attempts, f"semi-grand {semigrand}: {accepted:.0f} of {attempts:.0f} moves accepted "
                                       "(the test needs both accepted and rejected moves)")
        ni = {row["c_ni[2]"] for row in rows}
        if semigrand == "yes":
            check(len(ni) > 1, "semi-grand swaps never changed the composition")
        else:
            check(len(ni) == 1, "plain swaps changed the composition")
        per_move = modify_seconds(log) / attempts
        print(f"  atom/swap{' semi-grand' if semigrand == 'yes' else ''}{' (-sf kk)' if kokkos else ''} on {np_} rank(s): "
              f"{accepted:.0f}/{attempts:.0f} accepted, Ni count {sorted(ni)}; energies within {worst:.1e} eV of "
              f"uma eval at all {len(rows)} steps; {1e3 * per_move:.0f} ms per attempted move (Modify time / attempts)")


def case_workflow_gcmc(h, r):
    """fix gcmc full_energy (examples/gcmc_ar_cu: Ar inserted and deleted above a Cu slab, fp64): after
    every step the style's energy equals `uma eval` of the configuration (a different atom count from
    step to step), and the process's memory stays flat over 3 x 10 steps (LAMMPS's `info memory`: the peak
    resident set and the heap grow by less than 5 MB over the last 10)."""
    text = open(f"{ROOT}{SRC}/examples/gcmc_ar_cu/in.gcmc_ar_cu").read()
    check(text.rstrip().endswith("run             ${steps}"), "the example no longer ends with its run")
    text = text.rstrip()[:-len("run             ${steps}")] + "\n".join(
        ["run ${steps}", "info memory out log"] * 3) + "\n"
    d = f"{SRC}/examples/gcmc_ar_cu"
    with open(os.path.join(h, "in.gcmc"), "w") as f:
        f.write(text)
    p = in_root(f"cd {r} && LAMMPS_PLUGIN_PATH={BUILD} OMP_NUM_THREADS=1 mpirun -np 1 {LAMMPS}/bin/lmp "
                f"-in in.gcmc -var model {DEMO_MODEL} -var precision fp64 -var steps 10 "
                f"-log log.gcmc -screen none")
    log = open(os.path.join(h, "log.gcmc")).read() if os.path.exists(os.path.join(h, "log.gcmc")) else ""
    check(p.returncode == 0, f"the GCMC run failed:\n{log[-3000:]}\n{p.stderr[-1500:]} ({d})")
    rows = [row for run in runs_of(log) for row in run]
    frames = dump_frames(os.path.join(h, "dump.gcmc"))
    by_step = {f[0]: f for f in frames}
    rows = [row for row in rows if int(row["Step"]) in by_step]
    frames = [by_step[int(row["Step"])] for row in rows]
    ref = evaluate_frames(h, r, frames, {1: "Cu", 2: "Ar"}, "--task omat --precision fp64", DEMO_MODEL)
    worst = 0.0
    for row, e, (_, _, dd) in zip(rows, ref, frames):
        check(row["Atoms"] == len(dd["id"]), f"step {row['Step']:.0f}: atom count differs from the dump")
        worst = max(worst, close(row["PotEng"], e["energy"], 1e-10 * max(1.0, abs(e["energy"])),
                                 f"energy at step {row['Step']:.0f} ({row['Atoms']:.0f} atoms)"))
    counts = sorted({int(row["Atoms"]) for row in rows})
    check(len(counts) >= 3, f"the atom count took only the values {counts}: too few accepted exchanges")
    last = rows[-1]
    ins, dels = last["f_mc[3]"] + last["f_mc[5]"], last["f_mc[4]"] + last["f_mc[6]"]   # attempts, successes
    pool = [float(m) for m in re.findall(r"Current reserved memory pool size:\s*([\d.eE+-]+) Mbyte", log)]
    rss = [float(m) for m in re.findall(r"Maximum resident set size:\s*([\d.eE+-]+) Mbyte", log)]
    check(len(rss) == 3 and len(pool) == 3, f"{len(rss)} 'info memory' reports, expected 3")
    check(rss[2] - rss[1] < 5.0, f"the peak resident set grew by {rss[2] - rss[1]:.1f} MB over the last 10 GCMC "
                                 f"steps ({rss} MB)")
    check(pool[2] - pool[1] < 5.0, f"the heap grew by {pool[2] - pool[1]:.1f} MB over the last 10 GCMC steps ({pool} MB)")
    attempts = last["f_mc[3]"] + last["f_mc[5]"]
    per_move = modify_seconds(log) / max(1.0, attempts / 3)   # the last run's share
    print(f"  gcmc: atom counts {counts[0]}..{counts[-1]} ({len(counts)} values); energies within {worst:.1e} eV of "
          f"uma eval at {len(rows)} steps; peak RSS {rss} MB, heap {pool} MB after each 10 steps; {ins:.0f} insertion+deletion attempts, "
          f"{dels:.0f} accepted; about {1e3 * per_move:.0f} ms per trial move")


def case_workflow_neb(h, r):
    """NEB over 4 partitions (examples/neb_cu_vacancy: a vacancy hop in 107-atom Cu, the demo model, fp64,
    one rank per replica): the band converges, the forward and backward barriers agree (the end states
    are one configuration up to a lattice symmetry), and each replica's energy in its log equals `uma eval`
    of its final coordinates (1e-10)."""
    log = run_example(h, r, "neb_cu_vacancy", "in.neb_cu_vacancy", np_=4, flags="-partition 4x1")
    rows = [l.split() for l in log.splitlines() if re.match(r"^\s*\d+\s+[\d.eE+-]+\s+[\d.eE+-]+", l)]
    header = next(l.split() for l in log.splitlines() if l.split()[:2] == ["Step", "MaxReplicaForce"])
    last = dict(zip(header, map(float, rows[-1])))
    iterations = int(last["Step"])
    check(iterations < 2 * 300, f"NEB did not converge within its iterations ({iterations})")
    ebf, ebr = last["EBF"], last["EBR"]
    check(0.05 < ebf < 3.0, f"forward barrier {ebf:.4f} eV")
    close(ebf, ebr, 1e-6, "forward vs backward barrier of a symmetric hop")
    worst = 0.0
    for i in range(4):
        part = open(os.path.join(h, f"log.in.neb_cu_vacancy.{i}")).read()
        e = runs_of(part)[-1][-1]["E_pair"]   # the minimizer's thermo (style one)
        frames = dump_frames(os.path.join(h, f"dump.neb.{i + 1}"))
        ref = evaluate_frames(h, r, frames, SYMBOLS, "--task omat --precision fp64", DEMO_MODEL, name=f"replica{i}")
        worst = max(worst, close(e, ref[0]["energy"], 1e-10 * abs(ref[0]["energy"]), f"replica {i + 1} energy"))
    print(f"  neb: {iterations} iterations, barrier {ebf:.4f} eV forward, {ebr:.4f} eV backward; replica energies "
          f"within {worst:.1e} eV of uma eval")


def case_workflow_pimd(h, r):
    """fix pimd/langevin (REPLICA) with 4 beads over -partition 4x1, ensemble nve, fp64, the demo model, 32 Cu
    atoms at 300 K, 20 fs: each bead's potential energy (f_pimd[3]) and pair forces (fix store/force, before
    the fix turns them into normal-mode forces) equal `uma eval` of its coordinates (1e-10, 1e-9 eV/A), and the total energy of all beads (f_pimd[4], conserved in nve) is conserved as a second-order
    integrator conserves it: halving the time step cuts its largest deviation at least 3-fold (4 in theory)."""
    deviation = {}
    for dt, steps in ((0.0005, 40), (0.00025, 80)):
        tag = f"{steps}"
        text = PRE.format(plugin=PLUGIN).replace("atom_style atomic\n", "atom_style atomic\natom_modify map yes\n") + f"""
variable u uloop 4
boundary p p p
lattice fcc 3.615
region box block 0 2 0 2 0 2
create_box 1 box
create_atoms 1 box
mass 1 63.546
displace_atoms all random 0.05 0.05 0.05 ${{u}}1 units box
pair_style uma task omat precision fp64
pair_coeff * * {DEMO_MODEL} Cu
timestep {dt}
# the pair forces of this bead, stored before fix pimd/langevin turns them into normal-mode forces
fix sf all store/force
fix pimd all pimd/langevin ensemble nve temp 300.0 integrator obabo fmmode physical
thermo {steps // 8}
thermo_style custom step pe f_pimd[3] f_pimd[4]
thermo_modify format float %.15g
run {steps}
write_dump all custom dump.bead{tag}.${{u}} id type x y z f_sf[1] f_sf[2] f_sf[3] modify sort id format float %.17g
"""
        lammps(h, r, f"in.pimd{tag}", text, np_=4, flags="-partition 4x1")
        totals, worst, worst_f = [], 0.0, 0.0
        for i in range(4):
            rows = runs_of(open(os.path.join(h, f"log.in.pimd{tag}.{i}")).read())[-1]
            totals.append([row["f_pimd[4]"] for row in rows])
            e = rows[-1]["f_pimd[3]"]
            close(rows[-1]["PotEng"], e, 1e-10 * abs(e), f"bead {i + 1}: pe vs f_pimd[3]")
            if tag == "40":
                frames = dump_frames(os.path.join(h, f"dump.bead{tag}.{i + 1}"))
                ref = evaluate_frames(h, r, frames, SYMBOLS, "--task omat --precision fp64", DEMO_MODEL,
                                      name=f"bead{i}")
                worst = max(worst, close(e, ref[0]["energy"], 1e-10 * abs(ref[0]["energy"]), f"bead {i + 1} energy"))
                d = frames[0][2]
                worst_f = max(worst_f, close(np.stack([d["f_sf[1]"], d["f_sf[2]"], d["f_sf[3]"]], 1),
                                             np.reshape(ref[0]["forces"], (-1, 3)), 1e-9, f"bead {i + 1} forces"))
        total = np.array(totals[0])
        for t in totals[1:]:
            close(t, total, 1e-9 * np.abs(total).max(), "the total energy of all beads differs between the beads' logs")
        deviation[dt] = np.abs(total - total[0]).max() / (4 * 32)
        if tag == "40":
            bead_check, bead_forces = worst, worst_f
    ratio = deviation[0.0005] / deviation[0.00025]
    check(ratio > 3.0, f"halving the time step cut the total energy's deviation only {ratio:.2f}-fold "
                       f"({deviation[0.0005]:.2e} -> {deviation[0.00025]:.2e} eV per atom-bead)")
    print(f"  pimd/langevin, 4 beads, nve, 20 fs: largest deviation of the total energy {deviation[0.0005]:.2e} eV per "
          f"atom-bead at 0.5 fs, {deviation[0.00025]:.2e} at 0.25 fs ({ratio:.1f}x); bead energies and pair forces within "
          f"{bead_check:.1e} eV and {bead_forces:.1e} eV/A of uma eval")


def case_workflow_python(h, r):
    """examples/python_ase/uma_from_python.py in the root's python3: LAMMPS's Python module (commands,
    extract_compute, gather_atoms) and ASE's LAMMPSlib with pair_style uma give `uma eval`'s energy and forces
    of the same structure (fp64, 1e-10), and ASE's BFGS lowers the energy."""
    p = in_root(f"cd {r} && OMP_NUM_THREADS=1 python3 {SRC}/examples/python_ase/uma_from_python.py "
                f"--plugin {PLUGIN} --model {DEMO_MODEL} --json")
    check(p.returncode == 0, f"uma_from_python.py failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    pos, cell = np.array(out["positions"]), np.array(out["cell"])
    frame = (0, cell, {"x": pos[:, 0], "y": pos[:, 1], "z": pos[:, 2], "type": np.ones(len(pos))})
    ref = evaluate_frames(h, r, [frame], SYMBOLS, "--task omat --precision fp64", DEMO_MODEL)[0]
    for part in ("module", "ase"):
        close(out[part]["energy"], ref["energy"], 1e-10 * abs(ref["energy"]), f"{part} energy")
        close(np.array(out[part]["forces"]), np.reshape(ref["forces"], (-1, 3)), 1e-9, f"{part} forces")
    check(out["ase"]["relaxed_energy"] < out["ase"]["energy"], "BFGS did not lower the energy")
    print(f"  python: lammps module and ASE LAMMPSlib energy {ref['energy']:.8f} eV = uma eval; "
          f"BFGS 5 steps -> {out['ase']['relaxed_energy']:.8f} eV")


def case_workflow_refusals(h, r):
    """Workflows that cannot be right are refused: fix uma/train under -partition (each replica would train
    its own copy of the model, and the replicas would no longer share one potential)."""
    text = PRE.format(plugin=PLUGIN) + f"""boundary p p p
lattice fcc 3.615
region box block 0 2 0 2 0 2
create_box 1 box
create_atoms 1 box
mass 1 63.546
pair_style uma task omat
pair_coeff * * {MODEL} Cu
fix learn all uma/train 2 label 4 reference lj/cut 5.0 coeff 1 1 0.4 2.3
run 0
"""
    out = lammps(h, r, "in.partition_train", text, np_=2, flags="-partition 2x1", fail=True)
    logs = out + "".join(open(os.path.join(h, f)).read() for f in os.listdir(h) if f.startswith("log.in.partition"))
    check("Fix uma/train cannot run under -partition (2 partitions)" in logs, f"no clear refusal:\n{logs[-1500:]}")
    print("  fix uma/train under -partition 2x1: refused")


CASES = {
    "workflow_rerun": case_workflow_rerun,
    "workflow_box_relax": case_workflow_box_relax,
    "workflow_atom_swap": case_workflow_atom_swap,
    "workflow_gcmc": case_workflow_gcmc,
    "workflow_neb": case_workflow_neb,
    "workflow_pimd": case_workflow_pimd,
    "workflow_python": case_workflow_python,
    "workflow_refusals": case_workflow_refusals,
}
