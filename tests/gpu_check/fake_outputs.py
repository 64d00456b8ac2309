"""What the fake machine's programs print, in the formats the real ones print: LAMMPS logs and
dumps of the ranks, devices and kokkos stages, `uma bench`, `uma eval` and fairchem's lines, the
PMPI probe's records, `lmp -h`, and a GoogleTest program.  Figures from the recorded outputs
(data/, doc/gpu_check_2026-12-04.json, doc/benchmarks.md) where the check reads them."""
import json
import os
import sys

GPU_TORCH_DIR = "/opt/torch/.venv/lib/python3.12/site-packages/torch"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "data")
RECORDED = os.path.join(REPO, "doc", "gpu_check_2026-12-04.json")
# H100, 2026-12-05, Cu 1,000 (doc/benchmarks.md, "GPU inference vs fairchem"): ms per step, peak MB
H100_MS = {("fairchem", "fp32"): 95.9, ("fairchem", "tf32"): 55.9, ("eager", "fp32"): 154.5, ("eager", "tf32"): 111.5,
           ("graph", "fp32"): 146.3, ("graph", "tf32"): 105.1, ("reference", "fp32"): 139.5,
           ("reference", "tf32"): 95.5}
H100_PEAK_MB = {"fairchem": 7639, "eager": 8545, "graph": 8600, "reference": 12300}
ENERGY = {"fp64": -287.6971095027586, "fp32": -287.69710955250264, "tf32": -287.715466255188}   # run1's tf32 stage
KERNEL_TIMES = "rotate_in_kernel      1.512 ms  (device copy 0.081 ms)\n"
NCU = "  rotate_in_kernel(const double *, double *)\n    Duration                      ms         1.51\n"
NVE_COLUMNS = ["Step", "PotEng", "KinEng", "TotEng", "Press", "Pxx", "Pyy", "Pzz", "Pxy", "Pxz", "Pyz"]
GTEST = """#!%s
import os, sys
TESTS = %r
if "--gtest_list_tests" in sys.argv:
    for suite in sorted({t.split(".")[0] for t in TESTS}):
        print(suite + ".")
        for t in TESTS:
            if t.startswith(suite + "."):
                print("  " + t.split(".", 1)[1])
    sys.exit(0)
n, i = int(os.environ.get("GTEST_TOTAL_SHARDS", "1")), int(os.environ.get("GTEST_SHARD_INDEX", "0"))
mine = [t for k, t in enumerate(TESTS) if k %% n == i]
for a in sys.argv[1:]:
    if a.startswith("--gtest_filter="):
        mine = [t for t in mine if t in a.split("=", 1)[1].split(":")]
failed = 0
for t in mine:
    print("[ RUN      ] " + t)
    ok = "Failing" not in t
    failed += not ok
    print("[       %%s ] %%s (3 ms)" %% ("OK" if ok else "FAILED", t))
sys.exit(1 if failed else 0)
"""


def option(argv, name, default=None):
    """The word after NAME in ARGV."""
    return argv[argv.index(name) + 1] if name in argv else default


def data(name):
    """The text of a recorded output in data/."""
    with open(os.path.join(DATA, name)) as f:
        return f.read()


def recorded(run="run1_whole_check_95adf59"):
    with open(RECORDED) as f:
        return json.load(f)[run]


def gtest_program(tests):
    """A GoogleTest program's behaviour (listing, sharding, filters) over TESTS."""
    return GTEST % (sys.executable, list(tests))


def thermo_table(columns, rows):
    return [" ".join(columns)] + [" ".join("%.17g" % v for v in row) for row in rows]


def nve_rows(scale, steps, extra=()):
    """Thermo rows of an NVE run: (step, PotEng, KinEng, TotEng, Press, six pressures, EXTRA...)."""
    return [[s, -1.0 * scale - 1e-9 * s, 0.5 + 1e-9 * s, -0.5 * scale, 100.0 * scale, 1.0, 2.0, 3.0, 0.1, 0.2, 0.3]
            + list(extra) for s in steps]


def write_dump(path, steps, natoms, columns, scale):
    with open(path, "w") as f:
        for step in steps:
            f.write("ITEM: TIMESTEP\n%d\nITEM: NUMBER OF ATOMS\n%d\nITEM: ATOMS id %s\n" % (step, natoms,
                                                                                       " ".join(columns)))
            for i in range(1, natoms + 1):
                values = (scale * (i + k + 0.25 * step) for k in range(len(columns)))
                f.write("%d %s\n" % (i, " ".join("%.17g" % v for v in values)))


def lammps_log(path, lines, runs):
    """A LAMMPS log: LINES, then each run's thermo table (columns, rows) and Loop time line."""
    out = list(lines)
    for columns, rows, natoms, procs in runs:
        out += thermo_table(columns, rows)
        out.append("Loop time of %.6g on %d procs for %d steps with %d atoms" % (0.5, procs, rows[-1][0] - rows[0][0],
                                                                                natoms))
        out.append("Performance: 1.000 ns/day, 24.000 hours/ns, 20.000 timesteps/s, 2.160 katom-step/s")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def pair_line(device, style="uma"):
    return "pair %s: model m.safetensors (UMA-1.1, 2 layers, cutoff 6 A), task omat, charge 0, spin 0, fp64 on %s" % (
        style, device)


def probe(prefix, nranks, calls=(1404, 1400)):
    for rank in range(nranks):
        with open("%s.%d" % (prefix, rank), "w") as f:
            f.write("calls %d off_main_thread 0 inside_autograd 0 first_bad none\n" % calls[rank])


def bench_line(struct, precision, cuda_graph=False, profile=False, chunk=None, device="cuda:0", refusals=False):
    """`uma bench`'s JSON line: run1's bench figures of STRUCT where recorded (doc/gpu_check_2026-12-04.json),
    the graph's refusal recorded there only where REFUSALS."""
    runs = {r["run"]: r for r in next(s for s in recorded()["stages"] if s["name"] == "bench")["details"]}
    label = "%s %s%s" % (struct, precision, " cuda_graph" if cuda_graph else "")
    r = dict(runs.get(label) or runs.get("%s %s" % (struct, precision)) or runs["cu_1000 fp32"])
    r.pop("run", None)
    r.pop("rc", None)
    r.update(device=device, edge_ops="lean", cuda_graph=cuda_graph, graph_captures=int(cuda_graph),
             graph_replays=8 if cuda_graph else 0, step_kernels=1624 if cuda_graph else 0,
             step_memory_ops=54 if cuda_graph else 0)
    if not refusals:
        r["graph_refusal"] = ""
    if profile:
        r["profile"] = {"ms_per_step": r["ms_per_step"] * 1.1, "top_ops": [{"op": "aten::mm", "ms": 40.0, "calls": 96}]}
    if chunk:
        r["chunk_edges"] = chunk
    return json.dumps(r)


def versus_line(mode, precision, struct="cu_1000"):
    """A `uma bench` (MODE eager, graph, reference) or fairchem line beside the H100's Cu 1,000 figures."""
    median = H100_MS[(mode, precision)] / 1e3
    line = {"structure": struct, "precision": precision, "device": "cuda:0", "first_call_s": 1.5, "load_s": 2.0,
            "time_s": {"min": median, "median": median, "max": median}, "peak_device_mb": H100_PEAK_MB[mode]}
    if mode == "fairchem":
        line.update(engine="fairchem-core fast", version="2.24.0", torch="2.11.0+cu130", backend="umas_fast_gpu")
    else:
        line.update(edge_ops="reference" if mode == "reference" else "lean", graph_captures=int(mode == "graph"),
                    graph_replays=9 if mode == "graph" else 0, graph_refusal="")
    return json.dumps(line)


def frame(precision, natoms=2):
    """One frame of `uma eval --json` (forces flat), in PRECISION."""
    shift = ENERGY[precision] - ENERGY["fp64"]
    return {"energy": ENERGY[precision], "forces": [1e-5 * (k + 1) + shift * 1e-3 for k in range(3 * natoms)],
            "stress": [0.001] * 6, "edges": 78000}


NKTV2P, PIP_VOLUME = 1.6021765e6, (3 * 3.615) ** 3
PIP_BUILD = ("-- CUDA-graph replay: built\n-- The lean edge kernels on CUDA: ON\n"
             "Successfully installed lammps-uma-0.1.0\n")


def pip_route_frame():
    """`uma eval --json` of the pip route's 108 Cu atoms (fake_lammps.pip_route's run 0 agrees)."""
    return {"energy": -397.2504186512, "forces": [0.01 * ((k % 7) - 3) + 1e-4 * k for k in range(324)],
            "virial": [12.5, 12.25, 12.75, 0.5, -0.25, 0.125], "stress": [0.001] * 9, "edges": 5616}


def lmp_help(kokkos=False):
    return ("Large-scale Atomic/Molecular Massively Parallel Simulator - 4 Jul 2026\n\nInstalled packages:\n\n"
            + ("KOKKOS MANYBODY PLUGIN\n\nKOKKOS package API: CUDA Serial\n" if kokkos else "MANYBODY PLUGIN\n\n")
            + "MPI v3.1: Open MPI v5.0.8, package: Open MPI, ident: 5.0.8\n")


def train_step_result():
    """bench/train_step.py's result on the K4L2 batch: ours lean and with the composition, fairchem."""
    side = {"median_seconds": 0.05, "host_reads_per_step": 0, "peak_device_mb": 900.0, "loss": 1.25}
    return {"device": "cuda", "batches": {"k4l2": {
        "atoms_per_batch": 71, "speedup": 1.2, "speedup_reference_edge_ops": 1.1, "lammps_uma": side,
        "lammps_uma_reference_edge_ops": dict(side, median_seconds=0.055),
        "fairchem": dict(side, median_seconds=0.06, host_reads_per_step=3)}}}
