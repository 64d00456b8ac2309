"""pair_style uma on several MPI ranks: the domain decomposition and the halo exchange.

Periodic Cu on 1, 2 and 4 ranks and newton off, a triclinic cell, ranks
without atoms, a charge-balanced model, the halo exchange against one rank
(static and through 100 MD steps), the ghost cutoff LAMMPS gets, and every
MPI call on LAMMPS's main thread.

CASES: name -> case(host_dir, root_dir), run by run_case.py (each a ctest, lammps.pair_uma.NAME).
"""
import os
import re

import numpy as np

from harness import (BALANCED_MODEL, CU_BOX, HALO_OUT, HERE, LAMMPS_POTENTIALS, MODEL, OUTPUT, PLUGIN, PRE, PROBE,
                     check, close, compare_to_reference, dump_structure, halo_results, lammps, lammps_batch, read_dump, read_xyz,
                     reference, same_as_one_rank, thermo, write_molecule_data)


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


def case_ghost_cutoff(h, r):
    """On 2 ranks the halo exchange needs LAMMPS's usual ghost cutoff (cutoff + skin);
    the deep-shell reference (ghosts deep) raises it to (layers + 1) x cutoff
    + skin, and switching to another pair style gives back the cutoff that style needs."""
    for env, want in (("", 6.0 + 2.0), ("ghosts deep", 3 * 6.0 + 2.0)):
        text = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=1) + \
            f"pair_style uma task omat {env}\npair_coeff * * {MODEL} Cu\nrun 0\ninfo communication out log\n" \
            "pair_style lj/cut 2.5\npair_coeff * * 0.1 2.3\nrun 0\ninfo communication out log\n"
        log = lammps(h, r, "in.ghost", text, np_=2)
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


def case_halo(h, r):
    """The halo exchange on 2, 3 and 4 ranks (processors 2x1x1, 3x1x1, 2x2x1, 1x2x2)
    gives the one-rank energy, forces, virial, per-atom energies and per-atom
    virials to 1e-10 (fp64): orthogonal Cu with subdomains thinner than the
    cutoff, a skewed triclinic cell, a slab (p p f), a molecule with empty ranks,
    a charge-balanced model; newton on and off; comm_style tiled with recursive
    bisection; and Cu in fp32 to 2e-5.  The deep-shell reference scheme
    (pair_style uma ... ghosts deep) is held to the same bound."""
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
    # The inputs first, then one lmp process per rank count (and environment): the one-rank
    # builds and references together, each multi-rank group together (lammps_batch).
    setup, refs, groups = [], {}, {}
    for name, (build, elements, args, model, runs) in systems.items():
        if build is None:   # a molecule in a 40 x 16 x 16 A periodic box: most subdomains are empty
            write_molecule_data(os.path.join(h, f"{name}.data"), syms, mol, ["C", "O", "H"])
            text = open(os.path.join(h, f"{name}.data")).read()
            for ax, length in (("x", 40), ("y", 16), ("z", 16)):
                text = re.sub(rf"\S+ \S+ {ax}lo {ax}hi", f"0 {length} {ax}lo {ax}hi", text)
            open(os.path.join(h, f"{name}.data"), "w").write(text)
            boundary = "boundary p p p\n"
        else:   # built once, so that every run has the same atom IDs
            setup.append((f"{name}_build", PRE.format(plugin=PLUGIN) + build + f"write_data {name}.data\n"))
            boundary = build.splitlines()[0] + "\n"
        if "precision" not in args:
            args += " precision fp64"
        tol = 2e-5 if "fp32" in args else 1e-10
        style = f"pair_style uma {args}\npair_coeff * * {model} {elements}\n"
        base = PRE.format(plugin=PLUGIN) + boundary + "{grid}" + f"read_data {name}.data\n" + style
        setup.append((f"{name}_1", base.format(grid="") + HALO_OUT.format(tag=f"{name}_1")))
        refs[name] = tol
        for grid, newton in runs:
            tiled = grid == "tiled"   # comm_style tiled, recursive bisection over 3 ranks
            np_ = 3 if tiled else int(np.prod([int(v) for v in grid.split()]))
            tag = f"{name}_{grid.replace(' ', 'x')}_{newton}"
            deep = newton == "deep"   # the reference scheme: (layers + 1) x cutoff shell, no exchange
            text = f"newton {'on' if deep else newton}\n" + \
                base.format(grid="comm_style tiled\n" if tiled else f"processors {grid}\n")
            deep_style = style.replace(f"pair_style uma {args}", f"pair_style uma {args} ghosts deep")
            text = text.replace(style, ("balance 1.0 rcb\n" if tiled else "") + (deep_style if deep else style)) + \
                HALO_OUT.format(tag=tag)
            groups.setdefault((np_, deep), []).append((name, grid, newton, tag, text))
    logs = lammps_batch(h, r, "in.halo_1", setup)
    refs = {name: (halo_results(h, f"{name}_1", logs[f"{name}_1"]), tol) for name, tol in refs.items()}
    worst = 0.0
    for (np_, deep), runs in groups.items():
        logs = lammps_batch(h, r, f"in.halo_{np_}_{deep}", [(tag, text) for *_, tag, text in runs], np_=np_)
        for name, grid, newton, tag, _ in runs:
            log = logs[tag]
            want = "ghosts deep: no halo exchange" if deep else f"pair uma: halo exchange on {np_} ranks"
            check(want in log, f"[{tag}] the log does not say '{want}'")
            if name == "molecule":
                check(re.search(r"Nlocal:\s+\S+ ave\s+\d+ max\s+0 min", log) is not None,
                      f"[{tag}] expected ranks without atoms")
            ref, tol = refs[name]
            err = same_as_one_rank(halo_results(h, tag, log), ref, tag, tol)
            if tol == 1e-10:
                worst = max(worst, err)
            scheme = "deep ghost shell (ghosts deep)" if deep else f"newton {newton}"
            print(f"  {name}, processors {grid}, {scheme}: equals one rank (worst {err:.1e} relative)")
    print(f"  worst deviation from one rank over all fp64 runs: {worst:.1e}")


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
                  "", f"LAMMPS_POTENTIALS={LAMMPS_POTENTIALS}"),
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


CASES = {
    "ranks": case_ranks,
    "halo": case_halo,
    "halo_md": case_halo_md,
    "ghost_cutoff": case_ghost_cutoff,
    "triclinic": case_triclinic,
    "balanced_model": case_balanced_model,
    "empty_ranks": case_empty_ranks,
    "mpi_threads": case_mpi_threads,
}
