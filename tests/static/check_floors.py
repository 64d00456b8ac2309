#!/usr/bin/env python3
"""The engine's rooms include only downward.

CMakeLists.txt declares each room of src/ with `uma_room(NAME BELOW A B ...
SOURCES ...)`, bottom floor first.  A room may include its own headers and
those of the rooms it stands on: the rooms after BELOW, and theirs, and so
on.  This check fails on
  - an `#include "ROOM/..."` in src/HERE/ where ROOM is neither HERE nor a
    room HERE stands on (an include that goes up or sideways),
  - a BELOW that names a room not declared before (so the floors stay a
    strict order), and
  - a folder of src/ that is not a declared room, and
  - an include of a room other than api/ (the engine's one public header,
    src/api/uma.h) from the LAMMPS side and the tool (OUTSIDE below; the
    tool's benchmarks may also use the instruments of measure/).

  check_floors.py REPO        the check; last line "floors: all passed"
  check_floors.py --self-test the check on made-up trees, each rule broken once
"""
import pathlib
import re
import sys
import tempfile

ROOM_CALL = re.compile(r"^\s*uma_room\(([^)]*)\)", re.M | re.S)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/[^"]*"', re.M)
SOURCE_SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}
# Folders outside src/ and the rooms each may include.
OUTSIDE = {"pair_style": {"api"}, "fix_train": {"api"}, "lammps_common": {"api"}, "plugin": {"api"},
           "tools": {"api", "measure"}}


def declared_rooms(cmake_text):
    """[(room, [rooms below])] in the order of declaration."""
    rooms = []
    for call in ROOM_CALL.finditer(cmake_text):
        words = re.sub(r"#[^\n]*", " ", call.group(1)).split()
        name, below, mode = words[0], [], None
        for w in words[1:]:
            if w in ("BELOW", "SOURCES", "THREADED"):
                mode = w
            elif mode == "BELOW":
                below.append(w)
        rooms.append((name, below))
    return rooms


def check(repo):
    repo = pathlib.Path(repo)
    problems = []
    rooms = declared_rooms((repo / "CMakeLists.txt").read_text())
    if not rooms:
        return ["CMakeLists.txt declares no uma_room"]
    stands_on = {}
    for name, below in rooms:
        reach = set()
        for b in below:
            if b not in stands_on:
                problems.append(f"CMakeLists.txt: room {name} stands on {b}, which is not declared before it")
                continue
            reach |= {b} | stands_on[b]
        stands_on[name] = reach
    for folder in sorted(p for p in (repo / "src").iterdir() if p.is_dir()):
        if folder.name not in stands_on:
            problems.append(f"src/{folder.name}/ is not a room declared in CMakeLists.txt (uma_room)")
    for here, allowed in stands_on.items():
        for path in sorted((repo / "src" / here).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            text = path.read_text(errors="replace")
            for m in INCLUDE.finditer(text):
                target = m.group(1)
                if target == here or target in allowed or target not in stands_on:
                    continue
                line = text.count("\n", 0, m.start()) + 1
                way = "up" if here in stands_on[target] else "sideways"
                problems.append(f"{path.relative_to(repo)}:{line}: room {here} includes {target}/ ({way}; "
                                f"{here} stands on {', '.join(sorted(allowed)) or 'nothing'})")
    for folder, allowed in OUTSIDE.items():
        for path in sorted((repo / folder).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            text = path.read_text(errors="replace")
            for m in INCLUDE.finditer(text):
                if m.group(1) in stands_on and m.group(1) not in allowed:
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"{path.relative_to(repo)}:{line}: {folder}/ includes {m.group(1)}/ "
                                    f"(only {', '.join(sorted(allowed))}/: the engine through src/api/uma.h)")
    return problems


def self_test():
    cmake = """uma_room(core SOURCES src/core/a.cpp)
uma_room(io BELOW core SOURCES src/io/b.cpp)
uma_room(graph BELOW core # comment
         SOURCES src/graph/c.cpp)
uma_room(model BELOW io graph SOURCES src/model/d.cpp)
"""
    good = {
        "src/core/a.h": '#include "core/b.h"\n',
        "src/io/b.cpp": '#include "core/a.h"\n#include <torch/torch.h>\n',
        "src/graph/c.cpp": '#include "core/a.h"\n#include "local.h"\n',
        "src/model/d.cpp": '#include "io/b.h"\n#include "graph/c.h"\n#include "core/a.h"\n',
        "tools/t.cpp": '#include "api/uma.h"\n#include "measure/m.h"\n#include "pair.h"\n',
    }
    cases = {
        "up": ({"src/core/x.h": '#include "model/d.h"\n'}, cmake, "room core includes model/ (up"),
        "sideways": ({"src/io/x.cpp": '  #include "graph/c.h"\n'}, cmake, "room io includes graph/ (sideways"),
        "undeclared below": ({}, cmake + "uma_room(train BELOW engine SOURCES x)\n",
                             "stands on engine, which is not declared"),
        "folder not a room": ({"src/extra/y.h": "\n"}, cmake, "src/extra/ is not a room"),
        "style past the facade": ({"pair_style/p.cpp": '#include "api/uma.h"\n#include "graph/c.h"\n'},
                                  cmake + "uma_room(api BELOW model)\n", "pair_style/ includes graph/"),
    }
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        def tree(name, files, text):
            root = pathlib.Path(tmp) / name
            for rel, body in {**good, **files}.items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(body)
            (root / "CMakeLists.txt").write_text(text)
            return root
        found = check(tree("good", {}, cmake))
        if found:
            failures.append(f"the good tree: {found}")
        for name, (files, text, want) in cases.items():
            found = check(tree(name.replace(" ", "_"), files, text))
            if not any(want in p for p in found):
                failures.append(f"{name}: want a finding with '{want}', got {found}")
    for f in failures:
        print("FAIL:", f)
    print("floors self-test: " + ("all passed" if not failures else f"{len(failures)} failed"))
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    problems = check(sys.argv[1])
    for p in problems:
        print("FAIL:", p)
    print("floors: " + ("all passed" if not problems else f"{len(problems)} includes against the floors"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
