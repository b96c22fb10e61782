"""benchmarks/goodput.py: the ETTR model of saves at once, in the background and to the
node-local tier at scale: the interval (Young's of the stall, never below the write), the
ETTR's terms, the measured files read (tiers.py's and background_saves.py's), the table."""

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
    """T / (T + S) x (1 - (R + L + (T + S) / 2 + W) / M), T Young's."""
    way, mtbf, restart = Saves("background", 2.0, 30.0, 45.0), 100 * HOUR, 120.0
    t = math.sqrt(2 * 2.0 * mtbf)
    expected = t / (t + 2.0) * (1 - (120.0 + 45.0 + (t + 2.0) / 2 + 30.0) / mtbf)
    assert goodput.ettr(way, mtbf, restart) == pytest.approx(expected)


@pytest.mark.parametrize("way, mtbf, restart, expected", [
    (Saves("at_once", 0.0), 10 * HOUR, 0.0, 1.0),  # nothing costs: all of it productive
    (Saves("at_once", 100.0), 0.01 * HOUR, 0.0, 0.0),  # failures faster than the work: 0
    (Saves("background", 0.0, 0.0), 1 * HOUR, 360.0, 0.9),  # the restart alone
    (Saves("tiered", 0.0, 0.0, 360.0), 1 * HOUR, 0.0, 0.9),  # the restore alone
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


TIERS = {"sizes": [{"mib": 100, "at_once_s": 0.3, "stall_s": 0.05, "write_s": 0.4,
                    "restore_s": 0.25, "local_stall_s": 0.1, "local_write_s": 0.2,
                    "restore_partner_s": 0.08}],
         "kills": []}


def test_from_measured(tmp_path) -> None:
    path = tmp_path / "bg.json"
    path.write_text(json.dumps([{"MiB": 100, "at_once_paid_s": 0.2, "background_paid_s": 0.01,
                                 "write_s": 0.15}]))
    assert goodput.from_measured(path, 100) == [
        Saves("at_once", 0.2, shared="stall"), Saves("background", 0.01, 0.15, shared="write")]
    assert goodput.from_measured(path, 100, 2.0) == [
        Saves("at_once", 0.4, shared="stall"), Saves("background", 0.02, 0.3, shared="write")]
    with pytest.raises(SystemExit, match=r"no state of 1024 MiB measured \(it has \[100\]\): "
                                         r"run benchmarks/background_saves.py --mib 1024"):
        goodput.from_measured(path, 1024)


def test_from_measured_tiers(tmp_path) -> None:
    """tiers.py's three ways: the tier's stall is its snapshot and a 1/K share of the
    background save to the shared directory, its write the local one; its restore the
    partner's."""
    path = tmp_path / "tiers.json"
    path.write_text(json.dumps(TIERS))
    at_once, background, tiered = goodput.from_measured(path, 100, 2.0, shared_every=5)
    assert at_once == Saves("at_once", 0.6, 0.0, 0.5, "stall")
    assert background == Saves("background", 0.1, 0.8, 0.5, "write")
    assert tiered.shared == ""  # its own nodes' times
    assert tiered.name == "tiered" and tiered.write == pytest.approx(0.4)
    assert tiered.stall == pytest.approx((0.1 + 0.05 / 5) * 2.0)
    assert tiered.restore == pytest.approx(0.16)
    with pytest.raises(SystemExit, match=r"no state of 1024 MiB measured \(it has \[100\]\): "
                                         r"run benchmarks/tiers.py --mib 1024"):
        goodput.from_measured(path, 1024)


def test_the_table_and_the_bad_arguments(tmp_path, capsys) -> None:
    path = tmp_path / "bg.json"
    path.write_text(json.dumps([{"MiB": 1024, "at_once_paid_s": 2.0,
                                 "background_paid_s": 0.1, "write_s": 1.5}]))
    assert goodput.main(["--measured", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == ("| nodes | job MTBF (h) | shared FS: a save at least (s) | at_once: "
                      "interval (s), ETTR | background: interval (s), ETTR |")
    assert out[3].startswith("| 16 | 375.00 | 0 | ")  # 16 GiB over 2 TB/s: 0.009 s
    assert out[-1].startswith("| 16,384 | 0.37 | 9 | ")  # 16 TiB over 2 TB/s: 8.8 s
    assert goodput.main(["--measured", str(path), "--state-gib", "64"]) == 0
    scaled = capsys.readouterr().out
    assert "(64 GiB state a node, scaled from 1024 MiB as measured in bg.json: at_once: stall " \
           "128.000 s, write 0.000 s, restore 0.000 s; background: stall 6.400 s, write " \
           "96.000 s, restore 0.000 s;" in scaled
    tiers = tmp_path / "tiers.json"
    tiers.write_text(json.dumps(TIERS))
    assert goodput.main(["--measured", str(tiers), "--mib", "100", "--shared-every", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "tiered: stall 0.150 s, write 0.200 s, restore 0.080 s;" in out[0]
    assert out[1].endswith("| tiered: interval (s), ETTR |")
    for argv, said in ((["--measured", str(tmp_path / "none.json")], "no such file"),
                       (["--measured", str(path), "--state-gib", "0"], "expected GiB > 0"),
                       (["--measured", str(path), "--restart-s", "-1"], "expected seconds"),
                       (["--measured", str(path), "--shared-every", "0"],
                        "--shared-every 0: expected a whole number >= 1"),
                       (["--measured", str(path), "--shared-tb-per-s", "0"],
                        "--shared-tb-per-s 0.0: expected TB/s > 0")):
        with pytest.raises(SystemExit):
            goodput.main(argv)
        assert said in capsys.readouterr().err


@pytest.mark.parametrize("way, floor, expected", [
    (Saves("at_once", 2.0, 0.0, 3.0, "stall"), 10.0, Saves("at_once", 10.0, 0.0, 10.0, "stall")),
    (Saves("at_once", 20.0, 0.0, 30.0, "stall"), 10.0,
     Saves("at_once", 20.0, 0.0, 30.0, "stall")),  # slower than the floor already
    (Saves("background", 0.1, 2.0, 3.0, "write"), 10.0,
     Saves("background", 0.1, 10.0, 10.0, "write")),  # the stall stays the snapshot's
    (Saves("tiered", 0.1, 2.0, 3.0), 10.0, Saves("tiered", 0.1, 2.0, 3.0)),  # its own nodes'
])
def test_at_scale_the_shared_file_system_bounds_its_saves(way, floor, expected) -> None:
    assert goodput.at_scale(way, floor) == expected


def test_the_rows_floor_is_every_node_s_state_over_the_bandwidth() -> None:
    ways = [Saves("background", 0.1, 1.0, 1.0, "write"), Saves("tiered", 0.1, 1.0, 1.0)]
    found = goodput.rows(ways, (16, 1024), 6000.0, 120.0, 2 ** 30, 1e9)
    assert [r["shared_s"] for r in found] == pytest.approx([16 * 2 ** 30 / 1e9,
                                                            1024 * 2 ** 30 / 1e9])
    # at 1,024 nodes the shared write (1,100 s) sets the background's interval; the tier's not
    assert found[1]["background_interval_s"] == pytest.approx(1024 * 2 ** 30 / 1e9)
    assert found[1]["tiered_ettr"] > found[1]["background_ettr"]
    assert found[0]["background_ettr"] > found[1]["background_ettr"]
