"""pair_style uma's inputs: memory budgets, restart and data files, the plugin path, hybrid/overlay, bad input.

CASES: name -> case(host_dir, root_dir), run by run_case.py (each a ctest, lammps.pair_uma.NAME).
"""
import json
import os
import re

import numpy as np

from harness import (BUILD, CU_BOX, MODEL, OUTPUT, PLUGIN, PRE, UMA, check, close, compare_to_reference,
                     dump_structure, in_root, lammps, reference, thermo)


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
    # A budget beyond the machine's memory is cut to what is available, and the line says so.
    log = lammps(h, r, "in.np1_huge", base + f"pair_style uma task omat memory 1e9\npair_coeff * * {MODEL} Cu\nrun 0\n")
    plans = re.findall(r"pair uma: memory plan(?: of rank 0)? at step 0: (.*)", log)
    asked = "(1000000000.00 GB asked for: more than available to this process)"
    check(len(plans) == 1 and "stored activations" in plans[0] and asked in plans[0],
          f"[np1_huge] expected one stored plan ending in '{asked}', got {plans}")
    budget = float(re.search(r"budget ([0-9.]+) GB", plans[0]).group(1))
    check(0 < budget < 1e4, f"[np1_huge] the budget {budget} GB was not cut to the machine's memory")
    print(f"  memory 1e9: {plans[0]}")


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
    log = lammps(h, r, "in.hybrid", text, env=f"LAMMPS_PLUGIN_PATH={BUILD}")
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
        ("ghosts", f"pair_style uma task omat ghosts wide\npair_coeff * * {MODEL} Cu", "ghosts must be halo or deep, got 'wide'"),
        ("notask", f"pair_style uma\npair_coeff * * {MODEL} Cu\nrun 0", "choose one with 'pair_style uma task NAME'"),
        ("charge", f"pair_style uma task omat charge 1\npair_coeff * * {MODEL} Cu\nrun 0",
         "task 'omat' takes no charge or spin input"),
        ("spin", f"pair_style uma task oc20 spin 2\npair_coeff * * {MODEL} Cu\nrun 0",
         "task 'oc20' takes no charge or spin input"),
        ("spin_zero", f"pair_style uma task omol spin 0\npair_coeff * * {MODEL} Cu\nrun 0",
         "task 'omol' needs a spin multiplicity 2S+1 >= 1"),
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
        ("cuda_graph_value", "pair_style uma task omat cuda_graph maybe", "cuda_graph must be yes or no, got 'maybe'"),
        ("cuda_graph_cpu", f"pair_style uma task omat device cpu cuda_graph yes\npair_coeff * * {MODEL} Cu\nrun 0",
         "CUDA-graph replay needs a CUDA device; the model runs on cpu"),
    ]
    cases = [(name, head + cmds + "\n", msg) for name, cmds, msg in cases]
    cases.append(("version", f"plugin load {BUILD}/umaplugin_wrong_version.so\n",
                  "was built for LAMMPS '1 Jan 2000' but this is LAMMPS '4 Jul 2026'"))
    cases.append(("kokkos_backend", f"plugin load {BUILD}/umaplugin_wrong_kokkos.so\n",
                  "was built for a KOKKOS package with the cuda backend in double precision"))
    cases.append(("kokkos_layout", f"plugin load {BUILD}/umaplugin_wrong_layout.so\n",
                  "was built for KOKKOS views in the 'default' layout, and this LAMMPS's KOKKOS uses another"))
    cases.append(("units", PRE.replace("units metal", "units real").format(plugin=PLUGIN) + box +
                  f"pair_style uma task omat\npair_coeff * * {MODEL} Cu\nrun 0\n", "requires 'units metal'"))
    # a 2d box's z length would enter the model's 3d neighbour graph and change the energy
    cases.append(("dimension2", PRE.format(plugin=PLUGIN) + "dimension 2\nboundary p p p\n"
                  "region box block 0 10 0 10 -0.5 0.5\ncreate_box 1 box\ncreate_atoms 1 single 1 1 0 units box\n"
                  f"create_atoms 1 single 3.5 1 0 units box\nmass * 63.546\npair_style uma task omat\n"
                  f"pair_coeff * * {MODEL} Cu\nrun 0\n", "requires 'dimension 3'"))
    for name, text, msg in cases:
        out = lammps(h, r, "in." + name, text, fail=True)
        check(msg in out, f"{name}: expected the error to say \"{msg}\"; got:\n{out[-1500:]}")
        print(f"  {name}: refused with \"{msg}\"")
    # The multi-rank (local) path refuses the same, naming the atoms by ID.
    for name in ("close",):
        text, msg = next((t, m) for n, t, m in cases if n == name)
        out = lammps(h, r, f"in.{name}_2ranks", text, np_=2, fail=True)
        check(msg in out, f"{name} on 2 ranks: expected the error to say \"{msg}\"; got:\n{out[-1500:]}")
        print(f"  {name} on 2 ranks: refused with \"{msg}\"")
    text = next(t for n, t, m in cases if n == "cuda_graph_cpu")
    msg = "cuda_graph yes applies to one MPI rank"
    out = lammps(h, r, "in.cuda_graph_2ranks", text, np_=2, fail=True)
    check(msg in out, f"cuda_graph on 2 ranks: expected \"{msg}\"; got:\n{out[-1500:]}")
    print(f"  cuda_graph on 2 ranks: refused with \"{msg}\"")
    # Non-finite positions that only rank 1 sees: LAMMPS checks coordinates
    # when it reneighbors, so an infinite velocity set on atoms in the middle
    # of rank 1's slab (no ghost copy on rank 0) gives infinite positions at
    # step 1.  Every rank must report it (error->all, so rank 0's log says
    # "ERROR: ..."), not only the rank that found it.
    text = (PRE.format(plugin=PLUGIN) +
            "boundary p p p\nprocessors 2 1 1\nlattice fcc 3.615\nregion box block 0 12 0 2 0 2\n"
            "create_box 1 box\ncreate_atoms 1 box\nmass * 63.546\n"
            f"pair_style uma task omat\npair_coeff * * {MODEL} Cu\n"
            "neighbor 0.5 bin\nneigh_modify every 1000 delay 0 check no\n"
            "region mid block 32 33.5 INF INF INF INF units box\ngroup bad region mid\n"
            "variable huge atom 1e300*1e300\nset group bad vx v_huge\n"
            "timestep 0.001\nfix 1 all nve\nrun 1\n")
    msg = "ERROR: Pair style uma: positions contain NaN or infinite values"
    out = lammps(h, r, "in.nonfinite_2ranks", text, np_=2, fail=True)
    check(msg in out, f"nonfinite on 2 ranks: expected \"{msg}\"; got:\n{out[-1500:]}")
    print(f"  nonfinite on 2 ranks (found on rank 1 only): refused on every rank with \"{msg}\"")


def single_task_config(dataset):
    """The tiny model's configuration with one dataset head (`dataset`) and its tasks only."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "potentials", "uma-s-tiny-random.safetensors")
    with open(path, "rb") as f:
        config = json.loads(json.loads(f.read(int.from_bytes(f.read(8), "little")))["__metadata__"]["config"])
    config["backbone"]["dataset_mapping"] = {dataset: dataset}
    config["head"]["datasets"] = [dataset]
    config["tasks"] = [t for t in config["tasks"] if t["datasets"] == [dataset]]
    return config


def case_model_change(h, r):
    """pair_coeff loading another model resolves the task and the default spin again: without a task
    keyword, a one-task model's task (omat, spin 0) then another one-task model's (omol, spin 1): the
    first model's task must not carry over, or the second model would be refused for not having it."""
    for dataset in ("omat", "omol"):
        with open(os.path.join(h, f"{dataset}.json"), "w") as f:
            json.dump(single_task_config(dataset), f)
        p = in_root(f"cd {r} && {UMA} init {dataset}.json {dataset}.safetensors --seed 3")
        check(p.returncode == 0, f"uma init {dataset}: {p.stdout[-500:]} {p.stderr[-500:]}")
    text = PRE.format(plugin=PLUGIN) + CU_BOX.format(ntypes=1) + """pair_style uma precision fp64
pair_coeff * * omat.safetensors Cu
run 0
pair_coeff * * omol.safetensors Cu
run 0
"""
    out = lammps(h, r, "in.model_change", text)
    for dataset, spin in (("omat", 0), ("omol", 1)):
        want = f"pair uma: model {dataset}.safetensors "
        line = next((l for l in out.splitlines() if l.startswith(want)), "")
        check(f"task {dataset}, charge 0, spin {spin}," in line,
              f"{dataset}: expected its task and spin {spin} in the model line; got {line!r}")
        print("  " + line[line.index("task "):].strip())


CASES = {
    "memory": case_memory,
    "model_change": case_model_change,
    "restart_data": case_restart_data,
    "plugin_path": case_plugin_path,
    "errors": case_errors,
}
