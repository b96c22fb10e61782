"""Ledger records as supervise and worker 0 write them, for the story's and report's tests:
one builder a record, times in seconds from T."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

T = 1_795_800_000.0
Record = Dict[str, Any]


def start(run: int, at: float, step: Optional[int] = None, requeues: int = 0,
          job: Optional[str] = "123") -> Record:
    return {"event": "run_start", "job": job, "run": run, "time": T + at,
            "nodes": "node[1-2]", "step": step, "requeues": requeues, "format": 1}


def restore(at: float, step: int, requeues: int = 0, plan: Optional[int] = 600,
            job: Optional[str] = "123") -> Record:
    return {"event": "restore", "job": job, "time": T + at, "step": step,
            "checkpoint": f"ckpt-{step}" if step else None, "skipped": [], "plan": plan,
            "nodes": "node[1-2]", "requeues": requeues, "format": 1}


def save(at: float, step: int, kind: str = "periodic", seconds: float = 0.5,
         ok: bool = True, job: Optional[str] = "123") -> Record:
    return {"event": "save" if ok else "save_failed", "job": job, "time": T + at,
            "step": step, "seconds": seconds, "kind": kind, "format": 1}


def slow(at: float, rank: int = 1, node: Optional[str] = "node2", seconds: float = 0.29,
         peers: float = 0.2, rounds: int = 3, window: int = 5,
         job: Optional[str] = "123") -> Record:
    return {"event": "slow", "job": job, "time": T + at, "rank": rank, "node": node,
            "seconds": seconds, "peers": peers, "rounds": rounds, "window": window,
            "format": 1}


def completed(at: float, step: int, job: Optional[str] = "123") -> Record:
    return {"event": "completed", "job": job, "time": T + at, "step": step, "format": 1}


def end(run: int, at: float, *, cause: str = "killed by a signal", status: int = 137,
        what: str = "task 1 on node2: Killed (signal 9)", node: Optional[str] = "node2",
        blamed: bool = True, action: str = "restart", came: str = "nothing",
        reached: Optional[int] = None, reached_at: Optional[float] = None,
        after: Optional[int] = None, seconds: float = 10.0,
        job: Optional[str] = "123") -> Record:
    return {"event": "run_end", "job": job, "run": run, "cause": cause, "what": what,
            "node": node, "blamed": blamed, "status": status, "step_before": None,
            "step_after": after, "progress": "advanced", "action": action,
            "seconds": seconds, "came": came, "warning": "USR1", "reached": reached,
            "reached_at": None if reached_at is None else T + reached_at, "time": T + at,
            "format": 1}


def night() -> List[Record]:
    """A job's night: run 1 killed (SIGKILL on node2) at step 237 after a save at 200,
    restarted; run 2 saved on the warning signal at 390 and requeued; run 3 completed at
    600. Wall time 163 s."""
    return [
        start(1, 0), restore(8, 0), save(20, 100, seconds=0.2), save(32, 200, seconds=0.2),
        end(1, 41, reached=237, reached_at=36, after=200, seconds=40),
        start(2, 42, 200), restore(50, 200), save(70, 390, "signal", seconds=0.3),
        end(2, 71, cause="saved, to run again", status=75, what="srun exited 75",
            node=None, blamed=False, action="requeue", came="the warning signal",
            reached=390, reached_at=70, after=390, seconds=29),
        start(3, 130, 390, requeues=1), restore(137, 390, requeues=1),
        save(160, 600, "final", seconds=0.25), completed(161, 600),
        end(3, 163, cause="completed", status=0, what="srun exited 0", node=None,
            blamed=False, action="end", reached=600, reached_at=161, after=600, seconds=32),
    ]
