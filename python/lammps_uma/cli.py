"""The console scripts of the pip-installed lammps-uma: `uma` (the engine's
command-line tool), `uma-convert` (fairchem checkpoint -> model file) and
`uma-export` (model file -> fairchem checkpoint)."""
import importlib.util
import os
import sys

from . import HERE, build_info, check_build, BuildMismatch


def uma():
    tool = os.path.join(HERE, "bin", "uma")
    if not build_info().get("uma_tool"):
        sys.exit("uma: this installation was built without the uma tool (no CLI11 headers were found "
                 "when it was built: Debian's libcli11-dev or conda's cli11); install them and rebuild")
    try:
        check_build()
    except BuildMismatch as error:
        sys.exit(str(error))
    os.execv(tool, [tool] + sys.argv[1:])


def _needs_fairchem(command):
    if importlib.util.find_spec("fairchem") is None:
        sys.exit(f"{command} needs fairchem-core: pip install 'lammps-uma[fairchem]'")


def convert():
    _needs_fairchem("uma-convert")
    from . import convert_checkpoint
    sys.exit(convert_checkpoint.main())


def export():
    _needs_fairchem("uma-export")
    from . import export_checkpoint
    sys.exit(export_checkpoint.main())
