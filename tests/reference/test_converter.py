"""The converter through its command line: clear errors for bad input, and
EMA/raw selection and metadata on a checkpoint that fairchem's own code wrote.
Two refusals and one conversion run `python convert_checkpoint.py` as a user
would; the other cases call its main() in this process (the same parser and
exit code, without importing torch and fairchem again for each).

usage: test_converter.py   (exit 0 when every check passes)
"""
import contextlib
import copy
import io
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CONVERTER = os.path.join(HERE, "..", "..", "tools", "convert_checkpoint.py")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(CONVERTER))

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402

import make_fixtures  # noqa: E402

failures = []


def convert(*args):
    """The converter's command line in a process of its own."""
    return subprocess.run([sys.executable, CONVERTER, *args], capture_output=True, text=True)


def convert_here(*args):
    """The converter's command line (its main(): the same parser, checks and exit code) in this
    process, which has imported torch and fairchem once already, for the cases of bad input."""
    import convert_checkpoint
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = convert_checkpoint.main(list(args))
        except SystemExit as e:   # argparse's refusals
            code = e.code
    return subprocess.CompletedProcess(["convert_checkpoint", *args], code, "", err.getvalue())


def expect_error(args, needle, run=convert_here):
    out = run(*args)
    if out.returncode != 2 or needle not in out.stderr:
        failures.append(f"{args}: expected exit 2 mentioning {needle!r}, got {out.returncode}: {out.stderr.strip()[-300:]}")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.safetensors")
        expect_error([os.path.join(tmp, "missing.pt"), out], "input file not found", run=convert)

        text = os.path.join(tmp, "text.pt")
        with open(text, "w") as f:
            f.write("not a checkpoint")
        expect_error([text, out], "is not a fairchem checkpoint", run=convert)

        plain = os.path.join(tmp, "plain.pt")
        torch.save({"weights": torch.ones(3)}, plain)
        expect_error([plain, out], "is not a fairchem inference checkpoint")

        training = os.path.join(tmp, "training.pt")
        torch.save({"unit_state": {}}, training)
        expect_error([training, out], "training checkpoint")

        good = os.path.join(tmp, "good.pt")
        checkpoint = make_fixtures.build_checkpoint("s1p1", make_fixtures.MODEL_SPECS["s1p1"], 5, good)
        expect_error([good, os.path.join(tmp, "no", "such", "dir", "m.safetensors")],
                     "output directory does not exist: " + os.path.join(tmp, "no", "such", "dir"))
        # neither a folder as the output nor the input itself: the checkpoint stays as it was
        folder = os.path.join(tmp, "folder")
        os.mkdir(folder)
        expect_error([good, folder], "the output is a directory")
        before = open(good, "rb").read()
        expect_error([good, good], "would replace the checkpoint it converts")
        if open(good, "rb").read() != before:
            failures.append("converting a checkpoint onto itself changed it")

        s2 = os.path.join(tmp, "s2.pt")
        bad = copy.copy(checkpoint)
        bad.model_config = copy.deepcopy(checkpoint.model_config)
        bad.model_config["backbone"]["act_type"] = "s2"
        torch.save(bad, s2)
        expect_error([s2, out], "act_type")

        ema, raw = os.path.join(tmp, "ema.safetensors"), os.path.join(tmp, "raw.safetensors")
        for args, run in (([good, ema], convert), ([good, raw, "--weights", "raw"], convert_here)):
            result = run(*args)
            if result.returncode != 0:
                failures.append(f"{args}: {result.stderr.strip()[-300:]}")
                return report()
        key = "backbone.sphere_embedding.weight"
        with safe_open(ema, "pt") as fe, safe_open(raw, "pt") as fr:
            meta = fe.metadata()
            config = json.loads(meta["config"])
            if meta.get("format") != "lammps-uma-model" or meta.get("format_version") != "1":
                failures.append(f"metadata: {meta.get('format')} {meta.get('format_version')}")
            if config["provenance"]["weights"] != "ema" or json.loads(fr.metadata()["config"])["provenance"]["weights"] != "raw":
                failures.append("provenance does not record ema/raw")
            if not torch.equal(fe.get_tensor(key), checkpoint.ema_state_dict["module." + key]):
                failures.append("ema file does not hold the EMA weights")
            if not torch.equal(fr.get_tensor(key), checkpoint.model_state_dict[key]):
                failures.append("raw file does not hold the raw weights")
            if config["model_id"] != "UMA-1.1":
                failures.append(f"model_id {config['model_id']!r}, expected the back-filled 'UMA-1.1'")
    return report()


def report() -> int:
    for f in failures:
        print("FAIL:", f)
    print(f"converter checks: {'all passed' if not failures else str(len(failures)) + ' failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
