"""What every reader of the stages' outputs needs: JSON files read and written whole, a file's
last lines, an exit status kept in a file, numbers that may not be numbers, and a check's
outcome written and printed."""
import json
import math
import os
import re

CUT = (124, 137)   # the exit statuses of a command its time limit stopped (timeout -k)


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def dump(obj, path):
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def tail(path, n=30):
    """The last N lines of PATH (every line where N is None); none where it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    return lines if n is None else lines[-n:]


def read_text(path):
    """PATH's text; empty where it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def read_jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def read_rc(dir_, name):
    """The exit status a stage kept in DIR/NAME.rc, or None."""
    try:
        with open(os.path.join(dir_, name + ".rc")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def last_json_line(path):
    """(the last line of PATH that is a JSON object, or None; all its lines)."""
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None, []
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line), lines
            except ValueError:
                pass
    return None, lines


def number(text):
    """float(text), or None where it is not a number."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def compact(x):
    """An integral float as an int (transfer counts), else the float."""
    return int(x) if finite(x) and x == int(x) else x


def first_match(text, **patterns):
    """{name: convert(the first group)} for each NAME=(REGEX, CONVERT) that matches TEXT."""
    out = {}
    for name, (regex, convert) in patterns.items():
        m = re.search(regex, text)
        if m:
            out[name] = convert(m.group(1))
    return out


def time_limited(rc):
    return " (time limit)" if int(rc) in CUT else ""


def finish(out, res, checks_failed, what):
    """Stores the checks' outcome in res, writes it, prints one line; the exit status."""
    res["checks_failed"] = checks_failed
    res["passed"] = not checks_failed
    dump(res, out)
    if checks_failed:
        print("%s: FAILED: %s" % (what, "; ".join(checks_failed)))
        return 1
    print("%s: passed" % what)
    return 0
