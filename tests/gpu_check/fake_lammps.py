"""LAMMPS on the fake machine: what lmp writes for each input of the check (its log, dumps, screen
file, the PMPI probe's records), by the input's name: the recorded logs of data/ for lammps_md,
largest and train, logs and dumps in LAMMPS's formats for ranks, devices and kokkos."""
import os
import shutil

import fake_outputs as out
from fake_outputs import option

NATOMS = 108
UMA_BYTES = (128 + 24 * NATOMS, 200 + 24 * NATOMS)   # uma's bytes read and uploaded per step (doc/benchmarks.md)
KK_BYTES = (128, 200)                                 # uma/kk's


def at(cwd, path):
    return path if os.path.isabs(path) else os.path.join(cwd, path)


def ranks(log, dumpfile, nranks, probe_prefix):
    """1 or 2 ranks: run 0 and 10 NVE steps, thermo every step with the transfer columns; the
    2-rank run through the halo exchange, its numbers 2e-13 off the 1-rank run's."""
    scale = 1.0 + (2e-13 if nranks == 2 else 0.0)
    transfers = (1, 1, 0, 0) if nranks == 1 else (10, 10, 2592, 11943936)   # run2's last steps
    columns = out.NVE_COLUMNS + ["c_pu[1]", "c_pu[2]", "c_pu[5]", "c_pu[6]"]
    lines = [out.pair_line("cuda:0")]
    if nranks == 2:
        lines.append("pair uma: halo exchange on 2 ranks: 64 values per ghost atom after the embedding and 1 of the "
                     "2 blocks; ghost cutoff 6 A + skin")
    out.lammps_log(log, lines, [(columns, out.nve_rows(scale, [0], transfers), NATOMS, nranks),
                                (columns, out.nve_rows(scale, range(11), transfers), NATOMS, nranks)])
    out.write_dump(dumpfile, (0, 10), 4, ["xu", "yu", "zu", "fx", "fy", "fz"], scale)
    if probe_prefix:
        out.probe(probe_prefix, nranks)


def nve(log, dumpfile, device, nranks, kokkos, columns_extra, transfers):
    """The devices and kokkos stages' input: run 0 (forces dumped), then 100 NVE steps."""
    style = "uma/kk" if kokkos else "uma"
    lines = [out.pair_line(device, style)]
    if kokkos:
        lines.append("pair uma/kk: in place on the Kokkos views (x, type, f); no host copies of atom data")
    columns = out.NVE_COLUMNS + columns_extra
    out.lammps_log(log, lines, [(columns, out.nve_rows(1.0, [0], transfers), NATOMS, nranks),
                                (columns, out.nve_rows(1.0, range(0, 101, 10), transfers), NATOMS, nranks)])
    out.write_dump(dumpfile, (0,), NATOMS, ["fx", "fy", "fz"], 1e-3)


def speed(log, kokkos):
    steps_per_s = 7.5 if kokkos else 7.0
    with open(log, "w") as f:
        f.write("Loop time of 1.4 on 1 procs for 10 steps with 1000 atoms\n"
                "Loop time of %.6g on 1 procs for 100 steps with 1000 atoms\n" % (100 / steps_per_s))


def pip_route(log, dumpfile, shift):
    """The wheel's lmp with the pip-installed plugin: run 0 as uma eval gives it (the energy SHIFT
    eV off), 100 NVE steps."""
    frame = out.pip_route_frame()
    e, w = frame["energy"] + shift, frame["virial"]
    pressures = [v * out.NKTV2P / out.PIP_VOLUME for v in w]
    row0 = [0, e, 0.0, e, sum(pressures[:3]) / 3] + pressures + [out.PIP_VOLUME]
    lines = ["Loaded 1 plugins from /b/pip-venv/lib/python3.12/site-packages/lammps_uma", out.pair_line("cuda:0")]
    columns = out.NVE_COLUMNS + ["Volume"]
    out.lammps_log(log, lines, [(columns, [row0], NATOMS, 1),
                                (columns, [[s] + row0[1:] for s in range(0, 101, 10)], NATOMS, 1)])
    with open(dumpfile, "w") as f:
        f.write("ITEM: TIMESTEP\n0\nITEM: NUMBER OF ATOMS\n%d\nITEM: ATOMS id fx fy fz\n" % NATOMS)
        for i in range(NATOMS):
            f.write("%d %s\n" % (i + 1, " ".join("%.17g" % v for v in frame["forces"][3 * i:3 * i + 3])))


def lmp(args, cwd, nranks, exported, pip_shift=0.0):
    """lmp ARGS run in CWD on NRANKS ranks (EXPORTED: mpirun's -x variables); what it prints."""
    kokkos = "-k" in args
    if "-h" in args:
        return out.lmp_help("/kk/" in args[0])
    infile = os.path.basename(option(args, "-in", ""))
    var = {args[i + 1]: args[i + 2] for i, a in enumerate(args[:-2]) if a == "-var"}
    log = at(cwd, option(args, "-log", "log.lammps"))
    device = "cuda:0" if var.get("device") == "cuda" else var.get("device", "cuda:0")
    if infile in ("in.plugin_probe", "in.kk_probe"):
        with open(at(cwd, option(args, "-screen")), "w") as f:
            f.write("Loading plugin: UMA-S universal potential%s by lammps-uma\n"
                    % (", KOKKOS package variant" if infile == "in.kk_probe" else ""))
    elif infile == "in.uma_nve":
        shutil.copy(os.path.join(out.DATA, "lammps_md_graph.log" if var["graph"] == "yes" else "lammps_md.log"), log)
    elif infile == "in.largest":
        shutil.copy(os.path.join(out.DATA, "largest.log"), log)
    elif infile == "in.train":
        shutil.copy(os.path.join(out.DATA, "train.log"), log)
        shutil.copy(os.path.join(out.DATA, "train_probe.0"), exported["UMA_MPI_PROBE"] + ".0")
    elif infile == "in.ranks":
        ranks(log, var["dumpfile"], nranks, exported.get("UMA_MPI_PROBE"))
    elif infile == "in.devices":
        nve(log, var["dumpfile"], device, nranks, False, [], ())
    elif infile == "in.kokkos":
        nve(log, var["dumpfile"], device, nranks, kokkos, ["c_pu[1]", "c_pu[2]", "c_pu[7]", "c_pu[8]"],
            (1, 1) + (KK_BYTES if kokkos else UMA_BYTES))
    elif infile == "in.speed":
        speed(log, kokkos)
    elif infile == "in.pip_route":
        pip_route(log, var["dumpfile"], pip_shift)
    return ""
