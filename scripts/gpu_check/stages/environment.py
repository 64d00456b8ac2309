"""The environment stage: the machine, its tools and the torch of UMA_GPU_PYTHON, into
BUILD/environment.json (the summary's environment); fails where that torch cannot be imported or,
on a GPU, sees no CUDA device (the builds still run)."""
import json
import os
import platform

TORCH_PROBE = ("import json, torch; print(json.dumps({'torch': torch.__version__, 'torch_cuda': torch.version.cuda, "
               "'cuda_available': torch.cuda.is_available(), 'cmake_prefix': torch.utils.cmake_prefix_path, "
               "'device': torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}))")


def first_line(check, argv):
    """The first non-empty line a tool prints (stdout, then stderr), or None where it fails."""
    rc, out, err = check.runner.output(argv, env=check.env, limit_s=120)
    lines = [l for l in (out + err).splitlines() if l.strip()]
    return lines[0].strip() if rc == 0 and lines else None


def environment(check):
    """The environment record of this run, but its torch."""
    which = check.which
    return {"mode": check.mode, "network": check.network, "generator": check.generator, "jobs": check.jobs,
            "machine": platform.machine(), "cores": os.cpu_count(), "python": check.python,
            "cxx": first_line(check, ["c++", "--version"]), "cmake": first_line(check, ["cmake", "--version"]),
            "ninja": first_line(check, ["ninja", "--version"]) if which("ninja") else None,
            "ccache_used": bool(check.launcher),
            "nvcc": next((l for l in check.runner.output(["nvcc", "--version"], env=check.env)[1].splitlines()
                          if "release" in l), None) if which("nvcc") else None,
            "gpu": first_line(check, ["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                      "--format=csv,noheader"]) if which("nvidia-smi") else None}


def st_environment(stage):
    check = stage.check
    env = environment(check)
    rc, out, err = check.runner.output([check.python, "-c", TORCH_PROBE], env=check.env)
    if rc == 0:
        env.update(json.loads(out.strip().splitlines()[-1]))
    else:
        env["torch_error"] = (err.strip().splitlines() or ["?"])[-1]
    with open(check.envjson, "w") as f:
        json.dump(env, f, indent=1)
    stage.say(json.dumps(env, indent=1))
    return 0 if "torch" in env and (check.mode == "cpu" or env.get("cuda_available")) else 1
