#!/usr/bin/env bash
# Release check: what a user gets from `pip install mpi_resolver`, and the lint and type checks.
#
#   bash scripts/check_release.sh [STEP...]      STEP: build contents install ruff mypy imports
#                                                (default: all six, in that order)
#
#   build     python -m build: sdist, then the wheel built from that sdist; twine check --strict
#   contents  the wheel has mpi_resolver/py.typed and the licence, the sdist has LICENSE; the
#             metadata has the extras tf (tensorflow), tf-cpu, mpi, test
#   install   the wheel (not editable, no dependencies) in a fresh virtualenv without
#             TensorFlow or mpi4py: `mpi-resolver --help`, `import mpi_resolver`, and the CLI
#             on a fake 2-node Slurm step (`show --source slurm --gpus-per-node 0`, `tf-config`)
#   ruff      ruff check (settings in pyproject.toml)
#   mypy      mypy mpi_resolver (settings in setup.cfg)
#   imports   lint-imports: the import contract, the package's layers (pyproject.toml,
#             [tool.importlinter]); IMPORTS_ROOT=DIR checks the package in DIR instead
#
# Every step runs even if an earlier one failed (install and contents need build's files); the
# script exits non-zero if any step failed or a tool is missing, and prints one line per step.
# The tools come from the dev virtualenv: ${MPI_RESOLVER_VENV:-.venv}, made by scripts/setup.sh.
# MPI_RESOLVER_DIST=DIR keeps the built files in DIR (reused by later steps and runs: a step
# list without `build` reads them from there); otherwise a temporary directory is used.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${MPI_RESOLVER_VENV:-.venv}
PY="$ROOT/$VENV/bin/python"
[[ "$VENV" = /* ]] && PY="$VENV/bin/python"

STEPS=("$@")
((${#STEPS[@]})) || STEPS=(build contents install ruff mypy imports)
for step in "${STEPS[@]}"; do
  case "$step" in build|contents|install|ruff|mypy|imports) ;;
    *) echo "check_release: unknown step '$step' (build contents install ruff mypy imports)" >&2
       exit 2;;
  esac
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/check_release.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
DIST=${MPI_RESOLVER_DIST:-$TMP/dist}
mkdir -p "$DIST"
failed=()

say() { echo "check_release: $*"; }
fail() { say "$step FAILED: $*"; failed+=("$step"); }
ok() { say "$step ok${1:+: $1}"; }

need_tool() {  # need_tool MODULE PACKAGE: fails the step (never skips) if the tool is missing
  if ! "$PY" -c "import $1" 2>/dev/null; then
    fail "$2 is not installed in $VENV (scripts/setup.sh installs it: pip install -e '.[test]')"
    return 1
  fi
}

dists() {  # prints the one wheel and the one sdist in $DIST, or fails
  local wheels=("$DIST"/*.whl) sdists=("$DIST"/*.tar.gz)
  if [ ${#wheels[@]} -ne 1 ] || [ ! -f "${wheels[0]}" ] || [ ${#sdists[@]} -ne 1 ] \
      || [ ! -f "${sdists[0]}" ]; then
    fail "expected one wheel and one sdist in $DIST, found: $(ls "$DIST" | tr '\n' ' ')"
    return 1
  fi
  WHEEL=${wheels[0]} SDIST=${sdists[0]}
}

step_build() {
  need_tool build build || return
  need_tool twine twine || return
  if [ ! -x "$PY" ]; then fail "no $PY: run scripts/setup.sh"; return; fi
  rm -f "$DIST"/*.whl "$DIST"/*.tar.gz
  # sdist first, then the wheel from the sdist: a file missing from the sdist breaks the wheel.
  if ! "$PY" -m build --outdir "$DIST" . > "$TMP/build.log" 2>&1; then
    tail -n 30 "$TMP/build.log"; fail "python -m build failed (log above)"; return
  fi
  dists || return
  if ! "$PY" -m twine check --strict "$WHEEL" "$SDIST" > "$TMP/twine.log" 2>&1; then
    cat "$TMP/twine.log"; fail "twine check --strict failed"; return
  fi
  ok "$(basename "$SDIST") $(basename "$WHEEL"), twine check --strict passed"
}

step_contents() {
  dists || return
  "$PY" - "$WHEEL" "$SDIST" <<'EOF' || fail "see above"
import sys, tarfile, zipfile
from email.parser import Parser

wheel, sdist = sys.argv[1:]
problems = []
names = zipfile.ZipFile(wheel).namelist()
if "mpi_resolver/py.typed" not in names:
    problems.append("the wheel has no mpi_resolver/py.typed")
licences = [n for n in names if n.split("/")[0].endswith(".dist-info")
            and n.rsplit("/", 1)[-1] == "LICENSE"]
if not licences:
    problems.append("the wheel has no LICENSE in its .dist-info")
bad = [n for n in names if not (n.startswith("mpi_resolver/") or ".dist-info/" in n)]
if bad:
    problems.append(f"the wheel has files outside the package: {bad}")
with zipfile.ZipFile(wheel) as z:
    meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
    meta = Parser().parsestr(z.read(meta_name).decode())
    licence_text = z.read(licences[0]).decode() if licences else ""
if "Apache License" not in licence_text or "Version 2.0, January 2004" not in licence_text:
    problems.append("the wheel's LICENSE is not the Apache License 2.0")
with tarfile.open(sdist) as t:
    members = t.getnames()
top = members[0].split("/")[0]
for path in ("LICENSE", "README.md", "mpi_resolver/py.typed", "pyproject.toml"):
    if f"{top}/{path}" not in members:
        problems.append(f"the sdist has no {path}")
requires = meta.get_all("Requires-Dist") or []
extras = set(meta.get_all("Provides-Extra") or [])
for extra in ("tf", "tf-cpu", "mpi", "test"):
    if extra not in extras:
        problems.append(f"the metadata has no extra {extra!r}")
def dist_of(extra):
    return sorted(r.split(";")[0].strip() for r in requires if f'extra == "{extra}"' in r)
if not any(r.startswith("tensorflow>=") for r in dist_of("tf")):
    problems.append(f"extra 'tf' must be tensorflow (the GPU-capable build): {dist_of('tf')}")
if not any(r.startswith("tensorflow-cpu>=") for r in dist_of("tf-cpu")):
    problems.append(f"extra 'tf-cpu' must be tensorflow-cpu: {dist_of('tf-cpu')}")
base = [r for r in requires if "extra ==" not in r]
if base:
    problems.append(f"the package itself must depend on nothing (CLI without TF/MPI): {base}")
for field in ("Requires-Python", "License-Expression", "Summary"):
    if not meta.get(field):
        problems.append(f"the metadata has no {field}")
if meta.get("License-Expression") != "Apache-2.0" or meta.get("License"):
    problems.append(f"the licence must be the SPDX expression (PEP 639) License-Expression: "
                    f"Apache-2.0 and no License field: {meta.get('License-Expression')!r}, "
                    f"{meta.get('License')!r}")
classifiers = meta.get_all("Classifier") or []
if any(c.startswith("License ::") for c in classifiers):  # setuptools warns: PEP 639
    problems.append("a License :: classifier: the licence is the SPDX License-Expression")
for c in ("Operating System :: POSIX :: Linux", "Typing :: Typed"):
    if c not in classifiers:
        problems.append(f"classifier missing: {c}")
for p in problems:
    print("check_release: contents:", p)
if problems:
    sys.exit(1)
print(f"check_release: contents ok: wheel has mpi_resolver/py.typed and {licences[0]}, sdist "
      f"has {top}/LICENSE; extras {sorted(extras)}; tf = {dist_of('tf')}, "
      f"tf-cpu = {dist_of('tf-cpu')}, mpi = {dist_of('mpi')}")
EOF
}

step_install() {
  dists || return
  local venv="$TMP/venv" base
  base=$("$PY" -c 'import sys; print(sys._base_executable)') || { fail "no $PY"; return; }
  # Without pip of its own (ensurepip takes 10 s): the dev venv's pip installs into it.
  if ! "$base" -m venv --without-pip "$venv" > "$TMP/venv.log" 2>&1; then
    cat "$TMP/venv.log"; fail "could not create a virtualenv with $base"; return
  fi
  # No index, no dependencies: the wheel alone (the package needs nothing else).
  if ! "$PY" -m pip --python "$venv/bin/python" install -q --no-index --no-deps \
      --disable-pip-version-check "$WHEEL" > "$TMP/pip.log" 2>&1; then
    cat "$TMP/pip.log"; fail "pip install of the wheel failed"; return
  fi
  # A clean environment outside the source tree: nothing from the repository can be imported.
  local run=(env -i "PATH=$venv/bin:/usr/bin:/bin" "HOME=$TMP" "TMPDIR=$TMP")
  local out
  cd "$TMP" || return
  if ! out=$("${run[@]}" python -c '
import importlib.util, os, sys
import mpi_resolver
here = os.path.dirname(mpi_resolver.__file__)
assert here.startswith(sys.prefix), f"imported {here}, not the installed wheel"
assert os.path.exists(os.path.join(here, "py.typed")), "py.typed was not installed"
assert "tensorflow" not in sys.modules and "mpi4py" not in sys.modules
for absent in ("tensorflow", "mpi4py"):
    assert importlib.util.find_spec(absent) is None, f"{absent} is in the fresh venv"
print("import ok", mpi_resolver.__version__, here)' 2>&1); then
    echo "$out"; cd "$ROOT"; fail "import mpi_resolver failed in the fresh venv"; return
  fi
  if ! "${run[@]}" mpi-resolver --help > "$TMP/help.txt" 2>&1 \
      || ! grep -q "show" "$TMP/help.txt" || ! grep -q "tf-config" "$TMP/help.txt"; then
    cat "$TMP/help.txt"; cd "$ROOT"; fail "mpi-resolver --help"; return
  fi
  # A fake step of `srun -N2 -n4 --mpi=none` (no MPI: mpi4py is never imported), rank 0 and 3.
  local slurm=("SLURM_JOB_ID=42" "SLURM_STEP_ID=0" "SLURM_STEP_NUM_TASKS=4"
               "SLURM_STEP_NODELIST=node[1-2]" "SLURM_STEP_TASKS_PER_NODE=2(x2)")
  local rank0=("SLURM_PROCID=0" "SLURMD_NODENAME=node1" "SLURM_LOCALID=0" "SLURM_GTIDS=0,1")
  local rank3=("SLURM_PROCID=3" "SLURMD_NODENAME=node2" "SLURM_LOCALID=1" "SLURM_GTIDS=2,3")
  if ! "${run[@]}" "${slurm[@]}" "${rank0[@]}" mpi-resolver show --source slurm \
      --gpus-per-node 0 --json > "$TMP/show.json" 2> "$TMP/show.err"; then
    cat "$TMP/show.json" "$TMP/show.err"; cd "$ROOT"; fail "mpi-resolver show exited non-zero"
    return
  fi
  if ! "${run[@]}" "${slurm[@]}" "${rank3[@]}" mpi-resolver tf-config --source slurm \
      --gpus-per-node 0 > "$TMP/tfconfig.json" 2> "$TMP/tfconfig.err"; then
    cat "$TMP/tfconfig.json" "$TMP/tfconfig.err"; cd "$ROOT"
    fail "mpi-resolver tf-config exited non-zero"; return
  fi
  cd "$ROOT" || return
  "$venv/bin/python" - "$TMP/show.json" "$TMP/tfconfig.json" <<'EOF' || fail "see above"
import json, sys
show = json.load(open(sys.argv[1]))
tf_config = json.load(open(sys.argv[2]))
workers = ["node1:8888", "node1:8889", "node2:8888", "node2:8889"]
problems = []
if show.get("cluster") != {"worker": workers}:
    problems.append(f"show: cluster {show.get('cluster')}, expected worker {workers}")
if [r.get("host") for r in show.get("ranks", [])] != ["node1", "node1", "node2", "node2"]:
    problems.append(f"show: ranks {show.get('ranks')}")
if any(r.get("gpus") for r in show.get("ranks", [])):
    problems.append("show: --gpus-per-node 0 but a rank has GPUs")
if tf_config != {"cluster": {"worker": workers}, "task": {"type": "worker", "index": 3}}:
    problems.append(f"tf-config of rank 3: {tf_config}")
for p in problems:
    print("check_release: install:", p)
sys.exit(1 if problems else 0)
EOF
  [[ " ${failed[*]} " == *" install "* ]] && return
  ok "wheel installed without dependencies in a fresh venv (no TensorFlow, no mpi4py):"\
" --help, import, show and tf-config on a fake 2-node Slurm step"
}

step_ruff() {
  need_tool ruff ruff || return
  if ! "$PY" -m ruff check --no-fix --output-format concise . > "$TMP/ruff.log" 2>&1; then
    cat "$TMP/ruff.log"; fail "ruff check found problems (above)"; return
  fi
  ok "ruff check: no findings"
}

step_mypy() {
  need_tool mypy mypy || return
  # The third-party packages' types from .venv-plot: matplotlib's (cli/plot.py) are there, not
  # in .venv (scripts/setup_plot.sh); TensorFlow, mpi4py and JAX are untyped either way.
  local plot_py=${MPI_RESOLVER_PLOT_VENV:-.venv-plot}/bin/python
  if [ ! -x "$plot_py" ]; then
    fail "$plot_py is missing (matplotlib's types for mypy): run bash scripts/setup_plot.sh"
    return
  fi
  if ! "$PY" -m mypy --python-executable "$plot_py" mpi_resolver > "$TMP/mypy.log" 2>&1; then
    cat "$TMP/mypy.log"; fail "mypy mpi_resolver found problems (above)"; return
  fi
  ok "mypy mpi_resolver: $(tail -n 1 "$TMP/mypy.log")"
}

step_imports() {
  need_tool importlinter import-linter || return
  local root=${IMPORTS_ROOT:-$ROOT}
  # PYTHONPATH first: the package in $root, not the editable install's, is the one analysed.
  if ! (cd "$root" && PYTHONPATH="$root" "$(dirname "$PY")/lint-imports" --no-cache \
        > "$TMP/imports.log" 2>&1); then
    sed -n '/^Contracts$/,$p' "$TMP/imports.log"
    fail "lint-imports: the import contract is broken (above)"; return
  fi
  ok "lint-imports: $(grep -o '[0-9]* kept, [0-9]* broken' "$TMP/imports.log")"
}

for step in "${STEPS[@]}"; do
  start=$SECONDS
  "step_$step"
  say "$step took $((SECONDS - start)) s"
done
if ((${#failed[@]})); then
  say "FAILED: ${failed[*]}"
  exit 1
fi
say "all passed: ${STEPS[*]}"
