"""The unpack stage, the Debian packages' sysroot: each prepared .deb unpacked with ar and tar
(nlohmann-json and CLI11, header-only; GoogleTest's source); and the archive extraction every
build uses: tar, or Python's tarfile where tar cannot (e.g. no xz)."""
import glob
import os
import shutil
import tarfile
import tempfile

from ..runner import DEVNULL

NEEDED = ("usr/include/nlohmann/json.hpp", "usr/include/CLI/CLI.hpp", "usr/src/googletest/CMakeLists.txt")


def extract_tar(stage, archive, dest):
    """ARCHIVE into DEST; True where it was extracted."""
    if stage.run(["tar", "-xf", archive, "-C", dest], stderr=DEVNULL) == 0:
        return True
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(dest)
        return True
    except (OSError, tarfile.TarError) as e:
        stage.say("cannot extract %s: %s" % (archive, e))
        return False


def st_unpack(stage):
    check = stage.check
    shutil.rmtree(check.sysroot, ignore_errors=True)
    os.makedirs(check.sysroot)
    for deb in sorted(glob.glob(check.prep + "/debs/*.deb")):
        stage.say("unpacking " + os.path.basename(deb))
        tmp = tempfile.mkdtemp()
        if stage.run(["ar", "x", deb], cwd=tmp) != 0:
            return 1
        data = sorted(glob.glob(tmp + "/data.tar.*"))
        if not data or not extract_tar(stage, data[0], check.sysroot):
            return 1
        shutil.rmtree(tmp)
    return 0 if all(os.path.isfile(os.path.join(check.sysroot, n)) for n in NEEDED) else 1
