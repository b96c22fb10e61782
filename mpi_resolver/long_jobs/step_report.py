"""What a launcher says when a task of its step ends badly: srun's and mpirun's own lines,
read into the task, its node and how it ended (pure: lines in, records out).

Measured (Slurm 22.05.8, Open MPI 4.1.4)::

  srun: error: node2: task 1: Killed                      (SIGKILL; srun exits 137)
  srun: error: node2: task 1: Segmentation fault          (SIGSEGV; 139)
  srun: error: node2: task 1: Exited with exit code 3     (3)
  mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).
  mpirun detected that one or more processes exited with non-zero status, ... The first
  process to do so was:  /  Process name: [[30822,1],1]  /  Exit code:    3

With ``--kill-on-bad-exit=1`` srun then ends the other tasks ("task 0: Terminated") and exits
143 whatever the first task did: the first line is the cause, the rest its consequence.

Also read, as Slurm and the package print them: a task over its memory limit (srun's
``task 1: Out Of Memory``, slurmstepd's ``Detected 1 oom-kill event(s) in StepId=12.0``), the
step watchdog's line of a stuck or waiting rank (step_watchdog), faulthandler's
``Timeout (0:05:00)!``, the watchdog's backstop, which fires where the interpreter lock is held,
and a survivor's line naming a peer it lost (``lost worker:1 (rank 1 on node2, ...)``: a
stopped peer; the survivor ends first, and the failure is the peer's). Each may carry srun's
``--label`` prefix (``1: ``).
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from mpi_resolver.long_jobs.exits import HUNG
from mpi_resolver.long_jobs.hang_site import STUCK, WAITING, verdict_of

__all__ = ["TaskEnd", "StepReport", "signal_of", "Watchdog", "OUT_OF_MEMORY"]

_SRUN = re.compile(r"^srun: error: (?P<node>[^\s:]+): tasks? (?P<task>\d+)[\d,-]*: "
                   r"(?P<how>.+?)\s*$")
_SRUN_EXIT = re.compile(r"^Exited with exit code (\d+)$")
_MPIRUN_SIGNAL = re.compile(r"^(?:mpirun|prterun|mpiexec) noticed that process rank (\d+) "
                            r"with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]+)\))?")
_MPIRUN_FIRST = re.compile(r"^\s*Process name:\s*\[.*,(\d+)\]+\s*$")
_MPIRUN_CODE = re.compile(r"^\s*Exit code:\s*(\d+)\s*$")
_LABEL = r"^(?:(?P<label>\d+): )?"
#: slurmstepd prefixes its node's name where the step spans nodes ("slurmstepd-node2: ")
_OOM_STEP = re.compile(r"^slurmstepd(?:-[\w.-]+)?: error: Detected \d+ oom[-_]kill event")
_WATCHDOG = re.compile(_LABEL + r"mpi_resolver: step watchdog: .*?\((?:rank (?P<rank>\d+) )?on "
                       r"(?P<node>[^,\s]+), pid \d+\): (?P<what>.*?); (?P<words>.*)\. Python "
                       r"stacks above\.")
#: A survivor's line naming a peer it lost (examples/lost_worker.py: "train.py: lost worker:1
#: (rank 1 on node2, node2:8888). TensorFlow: ..."): the peer stopped answering.
_LOST = re.compile(_LABEL + r".*?\blost (?P<what>[A-Za-z_]+:\d+) \(rank (?P<rank>\d+) on "
                   r"(?P<node>[^,)\s]+)")
_BACKSTOP = re.compile(_LABEL + r"Timeout \(\d+:\d\d:\d\d\)!\s*$")
#: srun's words for a task the cgroup's memory limit ended.
OUT_OF_MEMORY = "Out Of Memory"
_CORE = " (core dumped)"
#: strsignal()'s words, as srun prints them ('Killed', 'Bus error'), to the signal's number.
_BY_WORDS: Dict[str, int] = {signal.strsignal(s) or s.name: int(s) for s in signal.Signals}


def signal_of(words: str) -> Optional[int]:
    """Returns the signal that strsignal() names ``words`` ('Killed': 9; ' (core dumped)'
    after it allowed), or None where no signal has those words."""
    return _BY_WORDS.get(words.removesuffix(_CORE))


@dataclass(frozen=True)
class TaskEnd:
    """One task's bad end as its launcher reported it: srun's ``task`` (mpirun's ``rank``)
    number, its node where named, how it ended in the launcher's words, and the exit code or
    the signal where those words tell."""

    task: int
    node: Optional[str]
    how: str
    code: Optional[int] = None
    signal: Optional[int] = None
    word: str = "task"

    @property
    def status(self) -> Optional[int]:
        """Returns the exit status this end stands for: the exit code, or 128 + the signal
        (a shell's rule); None where the words name neither."""
        if self.code is not None:
            return self.code
        return None if self.signal is None else 128 + self.signal

    def who(self) -> str:
        """Returns 'task 1 on node2' (mpirun's words: 'rank 1 on vm'; no node where the
        launcher named none)."""
        where = f" on {self.node}" if self.node else ""
        return f"{self.word} {self.task}{where}"

    def text(self) -> str:
        """Returns 'task 1 on node2: Killed (signal 9)'."""
        number = f" (signal {self.signal})" if self.signal is not None else ""
        return f"{self.who()}: {self.how}{number}"


def _exit(task: int, node: Optional[str], code: int, word: str) -> TaskEnd:
    return TaskEnd(task, node, f"Exited with exit code {code}", code=code, word=word)


def _srun(m: "re.Match[str]") -> TaskEnd:
    how, task, node = m["how"], int(m["task"]), m["node"]
    code = _SRUN_EXIT.match(how)
    if code:
        return _exit(task, node, int(code[1]), "task")
    return TaskEnd(task, node, how, signal=signal_of(how))


def _mpirun_signal(m: "re.Match[str]") -> TaskEnd:
    return TaskEnd(int(m[1]), m[2], m[4] or "Signaled", signal=int(m[3]), word="rank")


@dataclass(frozen=True)
class Watchdog:
    """The step watchdog's line of one rank: its rank (None where the line names none), node,
    what it says of the step, and its verdict (hang_site's STUCK, WAITING or UNKNOWN)."""

    rank: Optional[int]
    node: str
    what: str
    verdict: str


@dataclass
class StepReport:
    """The task ends a launcher reported, fed its output line by line (``feed``), in order;
    and what else the step's output said of its end: an out-of-memory event, the step
    watchdog's lines, faulthandler's backstop."""

    ends: List[TaskEnd] = field(default_factory=list)
    watchdogs: List[Watchdog] = field(default_factory=list)
    lost: List[TaskEnd] = field(default_factory=list)  # peers survivors named lost
    oom_event: bool = False  # slurmstepd saw the cgroup's OOM killer in the step
    backstop: bool = False  # faulthandler's timeout fired in a rank
    _rank: Optional[int] = None  # mpirun's 'Process name:' line, until its 'Exit code:'

    def feed(self, line: str) -> None:
        """Reads one line of the launcher's output (others' lines are passed over)."""
        if m := _SRUN.match(line):
            self.ends.append(_srun(m))
        elif m := _MPIRUN_SIGNAL.match(line):
            self.ends.append(_mpirun_signal(m))
        elif m := _MPIRUN_FIRST.match(line):
            self._rank = int(m[1])
        elif (m := _MPIRUN_CODE.match(line)) and self._rank is not None:
            self.ends.append(_exit(self._rank, None, int(m[1]), "rank"))
            self._rank = None
        elif m := _WATCHDOG.match(line):
            rank = m["rank"] if m["rank"] is not None else m["label"]
            self.watchdogs.append(Watchdog(None if rank is None else int(rank), m["node"],
                                           m["what"], verdict_of(m["words"])))
        elif m := _LOST.match(line):
            self.lost.append(TaskEnd(int(m["rank"]), m["node"],
                                     f"lost, a peer said ({m['what']})"))
        elif _OOM_STEP.match(line):
            self.oom_event = True
        elif _BACKSTOP.match(line):
            self.backstop = True

    @property
    def first(self) -> Optional[TaskEnd]:
        """Returns the first task end reported (the cause; later ones may be its
        consequence), or None where none was."""
        return self.ends[0] if self.ends else None

    def culprit(self) -> Optional[TaskEnd]:
        """Returns the task a failure is blamed on: the first reported end, unless a survivor
        named a peer lost (stopped, its node gone) and that peer did not end first: then the
        peer, as the survivor's own end is the consequence. None where nothing was said."""
        first = self.first
        peer = self.lost[0] if self.lost else None
        if peer is None or (first is not None and first.task == peer.task):
            return first
        return peer

    @property
    def out_of_memory(self) -> Optional[TaskEnd]:
        """Returns the first task the launcher reported out of memory, None where none."""
        return next((e for e in self.ends if e.how == OUT_OF_MEMORY), None)

    @property
    def hung(self) -> bool:
        """Returns whether a rank's watchdog, or its backstop, ended the step."""
        return bool(self.watchdogs) or self.backstop

    def stuck(self) -> Optional[TaskEnd]:
        """Returns the task a hang is blamed on: the first rank whose watchdog found it stuck
        (as a task end on its node), else the first reported end of a rank that did not say
        it was waiting for a peer (it never arrived: stopped, holding the interpreter lock,
        killed), else None: never a waiting peer."""
        for w in self.watchdogs:
            if w.verdict == STUCK and w.rank is not None:
                return TaskEnd(w.rank, w.node, f"hung ({w.what.split(', past ')[0]})",
                               code=HUNG)
        waiting = {w.rank for w in self.watchdogs if w.verdict == WAITING}
        return next((e for e in self.ends if e.task not in waiting), None)
