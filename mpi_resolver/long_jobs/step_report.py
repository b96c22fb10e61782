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
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field
from typing import Dict, List, Optional

__all__ = ["TaskEnd", "StepReport", "signal_of"]

_SRUN = re.compile(r"^srun: error: (?P<node>[^\s:]+): tasks? (?P<task>\d+)[\d,-]*: "
                   r"(?P<how>.+?)\s*$")
_SRUN_EXIT = re.compile(r"^Exited with exit code (\d+)$")
_MPIRUN_SIGNAL = re.compile(r"^(?:mpirun|prterun|mpiexec) noticed that process rank (\d+) "
                            r"with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]+)\))?")
_MPIRUN_FIRST = re.compile(r"^\s*Process name:\s*\[.*,(\d+)\]+\s*$")
_MPIRUN_CODE = re.compile(r"^\s*Exit code:\s*(\d+)\s*$")
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


@dataclass
class StepReport:
    """The task ends a launcher reported, fed its output line by line (``feed``), in order."""

    ends: List[TaskEnd] = field(default_factory=list)
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

    @property
    def first(self) -> Optional[TaskEnd]:
        """Returns the first task end reported (the cause; later ones may be its
        consequence), or None where none was."""
        return self.ends[0] if self.ends else None
