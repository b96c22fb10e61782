"""benchmarks/goodput.py: the ETTR model of saves at once and in the background at scale: the
interval (Young's of the stall, never below the write), the ETTR's terms, the measured
file read, the table."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("goodput", ROOT / "benchmarks" / "goodput.py")
goodput = importlib.util.module_from_spec(_spec)
sys.modules["goodput"] = goodput  # its dataclass looks its module up
_spec.loader.exec_module(goodput)
Saves = goodput.Saves
HOUR = 3600.0


@pytest.mark.parametrize("saves, mtbf, expected", [
    (Saves("at_once", 60.0), 1000 * HOUR, math.sqrt(2 * 60 * 1000 * HOUR)),
    (Saves("background", 0.5, 10.0), 1000 * HOUR, math.sqrt(2 * 0.5 * 1000 * HOUR)),
    (Saves("background", 0.001, 100.0), 1 * HOUR, 100.0),  # never below the write
    (Saves("background", 0.0, 0.0), 1 * HOUR, 0.0),
])
def test_interval(saves, mtbf, expected) -> None:
    assert goodput.interval(saves, mtbf) == pytest.approx(expected)


def test_ettr_terms() -> None:
    """T / (T + S) x (1 - (R + (T + S) / 2 + W) / M), T Young's."""
    way, mtbf, restart = Saves("background", 2.0, 30.0), 100 * HOUR, 120.0
    t = math.sqrt(2 * 2.0 * mtbf)
    expected = t / (t + 2.0) * (1 - (120.0 + (t + 2.0) / 2 + 30.0) / mtbf)
    assert goodput.ettr(way, mtbf, restart) == pytest.approx(expected)


@pytest.mark.parametrize("way, mtbf, restart, expected", [
    (Saves("at_once", 0.0), 10 * HOUR, 0.0, 1.0),  # nothing costs: all of it productive
    (Saves("at_once", 100.0), 0.01 * HOUR, 0.0, 0.0),  # failures faster than the work: 0
    (Saves("background", 0.0, 0.0), 1 * HOUR, 360.0, 0.9),  # the restart alone
])
def test_ettr_at_the_edges(way, mtbf, restart, expected) -> None:
    assert goodput.ettr(way, mtbf, restart) == pytest.approx(expected)


def test_the_background_buys_goodput_at_scale() -> None:
    at_once, background = Saves("at_once", 60.0), Saves("background", 2.0, 60.0)
    found = goodput.rows([at_once, background], (16, 16384), 6000.0, 120.0)
    assert [r["nodes"] for r in found] == [16, 16384]
    assert found[1]["mtbf_h"] == pytest.approx(6000 / 16384)
    for r in found:
        assert r["background_ettr"] > r["at_once_ettr"]
    assert found[0]["at_once_ettr"] > found[1]["at_once_ettr"]  # more nodes, more failures


def test_from_measured(tmp_path) -> None:
    path = tmp_path / "bg.json"
    path.write_text(json.dumps([{"MiB": 100, "at_once_paid_s": 0.2, "background_paid_s": 0.01,
                                 "write_s": 0.15}]))
    assert goodput.from_measured(path, 100) == [Saves("at_once", 0.2),
                                                Saves("background", 0.01, 0.15)]
    assert goodput.from_measured(path, 100, 2.0) == [Saves("at_once", 0.4),
                                                     Saves("background", 0.02, 0.3)]
    with pytest.raises(SystemExit, match=r"no state of 1024 MiB measured \(it has \[100\]\): "
                                         r"run benchmarks/background_saves.py --mib 1024"):
        goodput.from_measured(path, 1024)


def test_the_table_and_the_bad_arguments(tmp_path, capsys) -> None:
    path = tmp_path / "bg.json"
    path.write_text(json.dumps([{"MiB": 1024, "at_once_paid_s": 2.0,
                                 "background_paid_s": 0.1, "write_s": 1.5}]))
    assert goodput.main(["--measured", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == ("| nodes | job MTBF (h) | at_once: interval (s), ETTR | background: "
                      "interval (s), ETTR |")
    assert out[3].startswith("| 16 | 375.00 | ") and out[-1].startswith("| 16,384 | 0.37 | ")
    assert goodput.main(["--measured", str(path), "--state-gib", "64"]) == 0
    scaled = capsys.readouterr().out
    assert "(64 GiB state a node, scaled from 1024 MiB as measured in bg.json: stall at once " \
           "128.000 s; in the background 6.400 s, write 96.000 s;" in scaled
    for argv, said in ((["--measured", str(tmp_path / "none.json")], "no such file"),
                       (["--measured", str(path), "--state-gib", "0"], "expected GiB > 0"),
                       (["--measured", str(path), "--restart-s", "-1"], "expected seconds")):
        with pytest.raises(SystemExit):
            goodput.main(argv)
        assert said in capsys.readouterr().err
