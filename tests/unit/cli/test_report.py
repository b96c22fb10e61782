"""mpi-resolver report and status on a job's directory: the screen, --json, --plot (PNG, SVG,
a bad suffix, a missing directory, matplotlib missing), the bad directories (none, no ledger,
a torn last line, a newer format, an unknown --job), status's lines and --steps (cli/plot,
cli/story_args); nothing changed in DIR."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Tuple

import pytest

from mpi_resolver.cli.main import main
from mpi_resolver.long_jobs import ledger
from mpi_resolver.long_jobs.journal import PROGRESS
from tests.docs.blocks import block
from tests.harness.mutants import with_mutmut
from tests.unit.long_jobs.ledger_records import T, night, restore, save, start

pytestmark = pytest.mark.unit


ROOT = Path(__file__).resolve().parents[3]
#: The 'plot' extra's Python: matplotlib lives in .venv-plot, apart from TensorFlow's .venv
#: (scripts/setup_plot.sh), where the suite's own pytest runs without it.
PLOT_PY = ROOT / os.environ.get("MPI_RESOLVER_PLOT_VENV", ".venv-plot") / "bin" / "python"


def plotted(*args: str) -> subprocess.CompletedProcess:
    """Runs `mpi-resolver ARGS` in .venv-plot (fails, never skips, where it is missing)."""
    if not PLOT_PY.exists():
        pytest.fail(f"{PLOT_PY} is missing: run `bash scripts/setup_plot.sh` (the README's "
                    "commands run it)")
    return subprocess.run([str(PLOT_PY), "-m", "mpi_resolver", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT,
                          env=with_mutmut(ROOT / "mpi_resolver", os.environ))


def job_dir(tmp_path, records=None, tail: str = "") -> str:
    d = tmp_path / "ck"
    d.mkdir()
    with open(d / ledger.LEDGER, "w") as f:
        for r in night() if records is None else records:
            f.write(json.dumps(r) + "\n")
        f.write(tail)
    return str(d)


def files(directory: str) -> Dict[str, Tuple[int, float]]:
    return {n: (os.stat(os.path.join(directory, n)).st_size,
                os.stat(os.path.join(directory, n)).st_mtime) for n in os.listdir(directory)}


def test_the_report(tmp_path, capsys) -> None:
    d = job_dir(tmp_path)
    before = files(d)
    assert main(["report", d]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "job 123: training completed at step 600"
    assert out[-1].startswith("job 123: 3 runs, 1 restart (SIGKILL on node2), 1 requeue (USR1)")
    assert files(d) == before


def test_the_json(tmp_path, capsys) -> None:
    assert main(["report", job_dir(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (len(out["runs"]), out["restarts"], out["requeues"], out["steps_done"],
            out["steps_lost"]) == (3, 1, 1, 600, 37)
    assert 0 < out["ettr"] < 1


@pytest.mark.parametrize("name, magic", [("t.png", b"\x89PNG"), ("t.SVG", b"<?xml")])
def test_the_plot(tmp_path, name, magic) -> None:
    d = job_dir(tmp_path)
    before = files(d)
    path = str(tmp_path / name)
    p = plotted("report", d, "--plot", path)
    assert p.returncode == 0, p.stderr
    with open(path, "rb") as f:
        assert f.read(5).startswith(magic)
    assert p.stdout.splitlines()[-1] == f"the job's timeline: {path}"
    assert files(d) == before


def test_the_plot_beside_the_json_is_said_on_stderr(tmp_path) -> None:
    path = str(tmp_path / "t.svg")
    p = plotted("report", job_dir(tmp_path), "--json", "--plot", path)
    assert p.returncode == 0, p.stderr
    json.loads(p.stdout)
    assert p.stderr.strip() == f"the job's timeline: {path}"


@pytest.mark.parametrize("name, said", [
    ("t.pdf", "expected a file ending in .png or .svg (the picture's format), got .pdf"),
    ("t", "expected a file ending in .png or .svg (the picture's format), got no suffix"),
    ("nodir/t.png", "does not exist: make it, or name another"),
])
def test_a_bad_plot_path(tmp_path, capsys, name, said) -> None:
    path = str(tmp_path / name)
    assert main(["report", job_dir(tmp_path), "--plot", path]) == 2
    err = capsys.readouterr().err
    assert f"--plot {path}: " in err and said in err
    assert not os.path.exists(path)


def test_the_plot_without_matplotlib_names_the_extra(tmp_path, capsys, monkeypatch) -> None:
    """As in the suite's own Python, TensorFlow's .venv (scripts/setup.sh), in any other."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    assert main(["report", job_dir(tmp_path), "--plot", str(tmp_path / "t.png")]) == 2
    err = capsys.readouterr().err
    assert "--plot needs matplotlib" in err and "pip install \".[plot]\"" in err
    assert not os.path.exists(tmp_path / "t.png")


def test_not_a_directory(tmp_path, capsys) -> None:
    for command in ("report", "status"):
        assert main([command, str(tmp_path / "none")]) == 1
        assert f"{tmp_path / 'none'} is not a directory: give the job's checkpoint " \
               "directory" in capsys.readouterr().err


def test_no_ledger(tmp_path, capsys) -> None:
    for command in ("report", "status"):
        assert main([command, str(tmp_path)]) == 1
        err = capsys.readouterr().err
        assert f"{tmp_path} holds no {ledger.LEDGER}: it is not the checkpoint directory" in err


def test_a_torn_last_line_is_passed_over_with_a_warning(tmp_path, capsys) -> None:
    d = job_dir(tmp_path, tail='{"event": "save", "jo')
    assert main(["report", d]) == 0
    out, err = capsys.readouterr()
    assert "1 line(s) not whole (a crash in the middle of a record?) passed over" in err
    assert out.splitlines()[0] == "job 123: training completed at step 600"


def test_a_newer_ledger_is_refused(tmp_path, capsys) -> None:
    d = job_dir(tmp_path, [{**start(1, 0), "format": ledger.FORMAT + 1}])
    assert main(["report", d]) == 1
    assert "reads format 1 and older: upgrade it" in capsys.readouterr().err


def test_an_unreadable_ledger(tmp_path, capsys) -> None:
    d = tmp_path / "ck"
    (d / ledger.LEDGER).mkdir(parents=True)
    assert main(["report", str(d)]) == 1
    assert "holds no mpi_resolver.ledger.jsonl" in capsys.readouterr().err


def test_an_unknown_job(tmp_path, capsys) -> None:
    assert main(["report", job_dir(tmp_path), "--job", "9"]) == 1
    assert "holds no run of job 9; its jobs: 123" in capsys.readouterr().err


def test_status(tmp_path, capsys) -> None:
    now = time.time() - T
    records = [start(1, now - 40), restore(now - 30, 100), save(now - 10, 140)]
    d = job_dir(tmp_path, records)
    with open(os.path.join(d, PROGRESS), "w") as f:
        json.dump({"job": "123", "step": 150, "time": time.time() - 5}, f)
    before = files(d)
    assert main(["status", d, "--steps", "1000"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("job 123, run 1 (running), started ")
    assert out[1].startswith("newest checkpoint: step 140 (periodic")
    assert out[3].startswith("progress: step 150, ")
    assert out[4].startswith("expected end: step 1000 in about ")
    assert files(d) == before


def test_status_passes_over_another_jobs_progress(tmp_path, capsys) -> None:
    now = time.time() - T
    d = job_dir(tmp_path, [start(1, now - 40), restore(now - 30, 100), save(now - 10, 140)])
    with open(os.path.join(d, PROGRESS), "w") as f:
        json.dump({"job": "9", "step": 999, "time": time.time()}, f)
    assert main(["status", d]) == 0
    assert capsys.readouterr().out.splitlines()[3].startswith("progress: step 140;")


@pytest.mark.parametrize("steps", ["0", "x", "-3"])
def test_status_refuses_bad_steps(tmp_path, capsys, steps) -> None:
    with pytest.raises(SystemExit) as e:
        main(["status", str(tmp_path), f"--steps={steps}"])
    assert e.value.code == 2
    assert f"expected a whole number of steps > 0, got '{steps}'" in capsys.readouterr().err


def test_the_docs_commands_run(tmp_path, capsys) -> None:
    """docs/long-jobs.md's report and status commands, on a job's directory."""
    d = job_dir(tmp_path)
    lines = [ln.split("#")[0].split() for ln in block("report-commands").splitlines()
             if ln.strip()]
    assert [ln[:2] for ln in lines] == [["mpi-resolver", "report"]] * 3 + [
        ["mpi-resolver", "status"]]
    for words in lines:
        argv = [d if w == "checkpoints/123" else str(tmp_path / w) if w == "job.png" else w
                for w in words[1:]]
        if "--plot" in argv:  # matplotlib's, in .venv-plot
            p = plotted(*argv)
            assert p.returncode == 0, (argv, p.stderr)
        else:
            assert main(argv) == 0, argv
    assert (tmp_path / "job.png").exists()
    assert "job 123, run 3 (completed)" in capsys.readouterr().out
