"""What the tier benchmarks' real tests (tests/cluster/test_bench_tf_tiers.py,
tests/jax/test_bench_tiers.py) check alike in a kill's figures and lines."""
from __future__ import annotations

import re
from typing import Any, Dict, List


def check_kills(kills: List[Dict[str, Any]], stdout: str, mib: int, kill_at: int,
                shared_only: str, chose: str) -> None:
    """Asserts each kill's figures (the restored step, the steps lost, the 'auto' plans and
    interval, the mean a failure at any step would have lost, in steps and seconds) and their
    lines (a kill without the tier named ``shared_only``; ``chose``: "'auto' chose" and what
    follows), and the goal's line at ``mib`` MiB."""
    assert [(k["mib"], k["tiered"]) for k in kills] == [(mib, False), (mib, True)]
    for k in kills:
        assert k["killed_at"] == kill_at and 0 <= k["restored"] <= kill_at, k
        assert k["lost"] == kill_at - k["restored"] and k["plans"] and k["interval"] >= 1, k
        # worker 0's steps met the ledger's saves; none whole before the kill: none restored
        if k["per_failure"] is None:
            assert k["restored"] == 0 and k["per_failure_s"] is None, k
        else:
            assert 0 <= k["per_failure"] <= kill_at and k["per_failure_s"] >= 0, k
        assert k["interval_s"] > 0 and len(k["steps"]) >= kill_at // 2, k
        steps = "-" if k["per_failure"] is None else f"{k['per_failure']:.1f}"
        seconds = "-" if k["per_failure_s"] is None else f"{k['per_failure_s']:.2f}"
        mean = rf"{steps} steps \({seconds} s\)"
        way = "with the tier" if k["tiered"] else shared_only
        assert re.search(rf"^  kill at step {kill_at} \({mib} MiB, {way}\): restored step "
                         rf"{k['restored']}, {k['lost']} steps lost; a failure at any step of "
                         rf"the run would have lost {mean} on the mean; {chose}", stdout,
                         re.M), stdout
    assert re.search(rf"^goal at {mib} MiB: less training lost per failure with the tier: "
                     r"(met|not met) \((\d+\.\d\d|-) s against (\d+\.\d\d|-) s on the mean, "
                     r"cut (\d+\.\d\d|-) x; the intervals' ratio (\d+\.\d\d|-); in steps "
                     r"(\d+\.\d|-) steps \((\d+\.\d\d|-) s\) against (\d+\.\d|-) steps "
                     r"\((\d+\.\d\d|-) s\); at the kill \d+ against \d+ steps\)$", stdout,
                     re.M), stdout
