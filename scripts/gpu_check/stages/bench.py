"""The bench stage: `uma bench` on bulk Cu/Si with the full-size UMA-S-shaped model of random
weights, per structure and precision, eager; on a GPU also replayed as a CUDA graph (the step
captured once and replayed, with no refusal; its kernel and memory-operation count) and Cu 4,000
in chunks of 16,384 and of 131,072 edges (the recomputed path: a figure, not a check)."""
from ..report.bench import bench_run, read_last_json
from ..runner import STDOUT


def bench_setup(check):
    """(device, structures, precisions, repeats) of the bench and profile stages."""
    if check.mode == "gpu":
        return "cuda", ("cu_1000", "cu_4000", "si_1000"), ("fp32", "tf32"), 10
    return "cpu", ("cu_108", "si_64"), ("fp32",), 1


def uma_bench(stage, reserve, label, struct, out, *args):
    """`uma bench` of the model on STRUCT (task omat) under its share, its output in OUT."""
    check = stage.check
    return stage.limited(reserve, label, [check.uma, "bench", check.model, "%s/%s.extxyz" % (check.structs, struct),
                                          "--task", "omat"] + list(args), stdout=out, stderr=STDOUT)


def graph_replayed(stage, out):
    """Whether the replayed run captured its step and replayed it (and counted its kernels)."""
    j = read_last_json(out)
    try:
        ok = j["graph_captures"] >= 1 and j["graph_replays"] >= 1 and not j["graph_refusal"] and j["step_kernels"] > 0
        stage.say("cuda graph: captured and replayed: the step is %d kernels and %d memory operations, launched as "
                  "one graph" % (j["step_kernels"], j["step_memory_ops"]) if ok else
                  "cuda graph: NOT replayed (or no kernel counted): " + repr(j["graph_refusal"]))
        return ok
    except (KeyError, TypeError) as e:
        stage.say("cuda graph: cannot read %s's last line (%r)" % (out, e))
        return False


def show_chunks(stage, out):
    j = read_last_json(out)
    try:
        stage.say("recomputed in chunks of %d edges: %.1f ms per step, peak %.0f MB"
                  % (j["chunk_edges"], j["ms_per_step"], j["peak_device_mb"]))
    except (KeyError, TypeError) as e:
        stage.say("cannot read %s's last line (%r)" % (out, e))


def st_bench(stage):
    check, b = stage.check, stage.check.build
    stage.deadline(check.limits["bench"])
    device, structs, precisions, repeats = bench_setup(check)
    runs = len(structs) * len(precisions) + (len(structs) + 2 if check.mode == "gpu" else 0)   # replayed, chunks
    stage.plan(10 * runs)
    details, rc = check.details + "/bench.json", 0
    with open(details, "w") as f:
        f.write("[]\n")
    for s in structs:
        for p in precisions:
            stage.say("== uma bench %s --device %s --precision %s --repeats %d" % (s, device, p, repeats))
            out = "%s/bench-%s-%s.out" % (b, s, p)
            r = uma_bench(stage, 10, "uma bench %s %s" % (s, p), s, out, "--device", device, "--precision", p,
                          "--repeats", str(repeats))
            stage.show(out)
            rc |= stage.report(bench_run, "%s %s" % (s, p), out, r, details)
    if check.mode != "gpu":
        stage.say("tf32 runs are not made in the CPU proof (tf32 is CUDA only)",
                  "CUDA-graph replay runs are not made in the CPU proof (CUDA only; its refusal on the CPU is a test)")
        return 1 if rc else 0
    # The same fp32 runs replaying a CUDA graph (uma bench --cuda-graph).
    for s in structs:
        stage.say("== uma bench %s --device %s --precision fp32 --repeats %d --cuda-graph" % (s, device, repeats))
        out = "%s/bench-%s-graph.out" % (b, s)
        r = uma_bench(stage, 10, "uma bench %s fp32 --cuda-graph" % s, s, out, "--device", device, "--precision",
                      "fp32", "--repeats", str(repeats), "--cuda-graph")
        stage.show(out)
        rc |= stage.report(bench_run, "%s fp32 cuda_graph" % s, out, r, details)
        rc |= 0 if graph_replayed(stage, out) else 1
    # The recomputed path on a GPU (a figure, not a check): the planner caps its chunks at 16,384
    # edges, a CPU measurement; Cu 4,000 fp32 in chunks of 16,384 and of 131,072 edges.
    for chunk in (16384, 131072):
        stage.say("== uma bench cu_4000 --device %s --precision fp32 --repeats 3 --chunk %d" % (device, chunk))
        out = "%s/bench-cu_4000-chunk%d.out" % (b, chunk)
        r = uma_bench(stage, 10, "uma bench cu_4000 fp32 --chunk %d" % chunk, "cu_4000", out, "--device", device,
                      "--precision", "fp32", "--repeats", "3", "--chunk", str(chunk))
        if r != 0:
            stage.say("exited %d (bench-cu_4000-chunk%d.out)" % (r, chunk))
            continue
        show_chunks(stage, out)
    return 1 if rc else 0
