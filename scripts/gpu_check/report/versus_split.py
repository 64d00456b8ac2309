"""The versus_fairchem stage runs each tool once over every structure; this writes each
structure's share where report.versus reads it.  eval: the combined file is `uma eval --json`
over the structures' frames in their order: DIR/STRUCT/NAME.json (that frame, as a one-frame
list) and NAME.rc.  fairchem: it is bench/fairchem_worker.py's stdout over the structures and
precisions: DIR/STRUCT/fairchem-P.out (the run's line) and .rc.  A share that is missing gets
the process's exit status (124/137: cut), or 1 where the process exited 0."""
import json
import os

from .common import load


def write_share(dir_, struct, name, text, rc):
    """STRUCT's share of a run over every structure: NAME's output (None: missing) and NAME.rc."""
    d = os.path.join(dir_, struct)
    os.makedirs(d, exist_ok=True)
    if text is not None:
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    share_rc = 0 if text is not None else (rc if rc != 0 else 1)
    with open(os.path.join(d, os.path.splitext(name)[0] + ".rc"), "w") as f:
        f.write("%d\n" % share_rc)
    return share_rc


def fairchem_lines(path):
    """{(structure, precision): the JSON line bench/fairchem_worker.py printed for that run}."""
    lines = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                try:
                    result = json.loads(line)
                except ValueError:
                    continue
                if isinstance(result, dict):
                    lines[(result.get("structure"), result.get("precision"))] = line
    except OSError:
        pass
    return lines


def versus_split(kind, combined, rc, dir_, name, structs, precisions=()):
    rc = int(rc)
    missing = []
    if kind == "eval":
        frames = load(combined) if rc == 0 else None
        if frames is not None and (not isinstance(frames, list) or len(frames) != len(structs)):
            missing.append("%s holds %s frames for %d structures" % (
                combined, len(frames) if isinstance(frames, list) else "no", len(structs)))
            frames = None
        for i, struct in enumerate(structs):
            text = json.dumps([frames[i]]) if frames else None
            if write_share(dir_, struct, name + ".json", text, rc):
                missing.append("%s %s" % (struct, name))
    elif kind == "fairchem":
        lines = fairchem_lines(combined)
        for struct in structs:
            for prec in precisions:
                if write_share(dir_, struct, "fairchem-%s.out" % prec, lines.get((struct, prec)), rc):
                    missing.append("%s fairchem-%s" % (struct, prec))
    else:
        print("versus-split: eval or fairchem, not %r" % kind)
        return 2
    print("versus-split %s (exit %d): %s" % (kind, rc, "every structure's share written" if not missing
                                            else "missing: " + "; ".join(missing)))
    return 0
