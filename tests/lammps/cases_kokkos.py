"""pair_style uma/kk through LAMMPS's KOKKOS package (OpenMP).

CASES: name -> case(host_dir, root_dir), run by run_case.py (each a ctest, lammps.pair_uma.NAME).
"""
import os

from harness import (CU_BOX, HALO_OUT, HERE, MODEL, PLUGIN, PRE, check, close, halo_results, lammps, lammps_batch,
                     read_xyz,
                     same_as_one_rank, thermo, write_molecule_data)


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
    # The inputs first, then one lmp process per rank count and thread count
    # (lammps_batch): the builds and uma's one-rank references together.
    setup, groups, texts = [], {}, {}
    for name, (build, elements, args) in systems.items():
        if build is not None:
            setup.append((f"{name}_build", PRE.format(plugin=PLUGIN) + build + f"write_data {name}.data\n"))
        boundary = "boundary s s s\n" if build is None else build.splitlines()[0] + "\n"
        text = PRE.format(plugin=PLUGIN) + "newton {newton}\n" + boundary + f"read_data {name}.data\n" + \
            pair_lines[name]
        texts[name] = text
        setup.append((f"{name}_uma", text.format(newton="on") + HALO_OUT.format(tag=f"{name}_uma")))
        for np_, threads, newton in runs[name]:
            tag = f"{name}_kk_{np_}x{threads}_{newton}"
            groups.setdefault((np_, threads), []).append(
                (name, newton, tag, text.format(newton=newton) + HALO_OUT.format(tag=tag)))
    setup_logs = lammps_batch(h, r, "in.kokkos_setup", setup)
    refs = {name: halo_results(h, f"{name}_uma", setup_logs[f"{name}_uma"]) for name in systems}
    # hybrid/overlay sizes its buffers from uma's halo rows (host style too)
    tag = "null_type_uma_2"
    log = lammps(h, r, f"in.{tag}", texts["null_type"].format(newton="on") + HALO_OUT.format(tag=tag), np_=2)
    err = same_as_one_rank(halo_results(h, tag, log), refs["null_type"], tag)
    print(f"  null_type: uma in hybrid/overlay on 2 ranks equals 1 rank (worst {err:.1e} relative)")
    worst = 0.0
    for (np_, threads), jobs in groups.items():
        logs = lammps_batch(h, r, f"in.kokkos_{np_}x{threads}", [(tag, text) for *_, tag, text in jobs], np_=np_,
                            flags=f"-k on t {threads} -sf kk")
        for name, newton, tag, _ in jobs:
            log = logs[tag]
            check("pair uma/kk: model" in log, f"[{tag}] -sf kk did not pick pair_style uma/kk")
            # newton off on several ranks folds ghost forces on the host; everything else runs in place
            in_place = np_ == 1 or newton == "on"
            check(("pair uma/kk: in place on the Kokkos views" in log) == in_place and
                  ("pair uma/kk: atoms go through the host" in log) != in_place,
                  f"[{tag}] expected the {'in-place' if in_place else 'host'} data path")
            err = same_as_one_rank(halo_results(h, tag, log), refs[name], tag)
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
    # two cell sizes (32 and 108 atoms): what crosses per step must not grow with the atoms
    CELLS = (2, 3)
    per_step = {}
    for np_ in (1, 2):
        for kk in (False, True):
            jobs = [(f"steady_{np_}_{cells}_{kk}", PRE.format(plugin=PLUGIN) +
                     CU_BOX.replace("0 3 0 3 0 3", f"0 {cells} 0 {cells} 0 {cells}").format(ntypes=1) +
                     f"pair_style uma task omat precision fp64\npair_coeff * * {MODEL} Cu\n"
                     "neigh_modify every 1000 delay 0 check no\nvelocity all create 300 4928 loop geom\n"
                     "timestep 0.002\nfix 1 all nve\ncompute p all pair uma\n"
                     "thermo_style custom step c_p[1] c_p[2] c_p[7] c_p[8]\nthermo 1\nrun 20\n") for cells in CELLS]
            logs = lammps_batch(h, r, f"in.steady_{np_}_{kk}", jobs, np_=np_, flags="-k on t 1 -sf kk" if kk else "")
            for cells in CELLS:
                log = logs[f"steady_{np_}_{cells}_{kk}"]
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
        for cells in CELLS:
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
            small, large = CELLS
            check(per_step[1, large, True] == per_step[1, small, True],
                  f"1 rank: uma/kk's transfers grow with the atoms: {per_step[1, small, True]} with "
                  f"{4 * small ** 3}, {per_step[1, large, True]} with {4 * large ** 3}")
        small, large = CELLS
        print(f"  steady state, {np_} rank(s), 20 NVE steps, {4 * small ** 3} / {4 * large ** 3} atoms: uma/kk reads "
              f"{per_step[np_, small, True][2]:g} / {per_step[np_, large, True][2]:g} B and uploads "
              f"{per_step[np_, small, True][3]:g} / {per_step[np_, large, True][3]:g} B per step; uma reads "
              f"{per_step[np_, small, False][2]:g} / {per_step[np_, large, False][2]:g} B and uploads "
              f"{per_step[np_, small, False][3]:g} / {per_step[np_, large, False][3]:g} B")
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
    logs = {kk: lammps_batch(h, r, f"in.follow_{kk}", [(f"{job}_{kk}", base + cmds) for job, cmds in jobs.items()],
                             np_=2, flags="-k on t 1 -sf kk" if kk else "") for kk in (False, True)}
    for job, cmds in jobs.items():
        rows = {}
        for kk in (False, True):
            log = logs[kk][f"{job}_{kk}"]
            rows[kk] = thermo(log)[1]
            if job in ("restart", "data"):
                check("pair uma/kk: model" in log.split(f"read_{job}")[-1] or not kk,
                      f"after read_{job}, -sf kk did not pick pair_style uma/kk")
        check(len(rows[True]) == len(rows[False]) >= 3, f"{job}: thermo rows differ: {len(rows[True])} vs {len(rows[False])}")
        for a, b in zip(rows[False], rows[True]):
            for col in ("PotEng", "TotEng", "Press"):
                close(b[col], a[col], 1e-10 * max(1.0, abs(a[col])), f"uma/kk {job} step {int(a['Step'])} {col}")
        print(f"  {job} on 2 ranks with uma/kk follows uma: {len(rows[True])} thermo rows equal to 1e-10")


CASES = {
    "kokkos": case_kokkos,
}
