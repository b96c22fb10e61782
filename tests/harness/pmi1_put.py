"""A PMI-1 client of its own, for Slurm's pmi2 plugin: one ``put`` line of exactly N bytes.

Run as a task of ``srun --mpi=pmi2`` (stdlib only)::

    python pmi1_put.py N

It speaks the PMI-1 wire protocol on the socket Slurm passes in PMI_FD (as MPICH's own PMI
does under srun --mpi=pmi2): init, get_my_kvsname, then one put whose whole line, newline
included, is N bytes; then a barrier and a get of that key. It prints each answer and how
much of the value Slurm stored. Slurm 22.05 answers a put line of more than 1,024 bytes with
rc=0 but stores nothing (and logs "value not properly terminated in client request"); the task
then waits for ever, as an MPI library waits for a peer's address that never comes.
"""

from __future__ import annotations

import os
import signal
import socket
import sys


def ask(sock: socket.socket, line: str) -> str:
    """Sends one PMI-1 command line; returns the answer line (blocks until there is one)."""
    sock.sendall(line.encode())
    answer = b""
    while not answer.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise SystemExit("PMI_FD closed by Slurm")
        answer += chunk
    return answer.decode().strip()


def main(argv: list[str]) -> int:
    size = int(argv[0])
    sock = socket.socket(fileno=int(os.environ["PMI_FD"]))
    ask(sock, "cmd=init pmi_version=1 pmi_subversion=1\n")
    kvs = ask(sock, "cmd=get_my_kvsname\n").split("kvsname=", 1)[1].split()[0]
    key = f"k{os.environ.get('PMI_RANK', '0')}"
    head = f"cmd=put kvsname={kvs} key={key} value="
    line = head + "A" * (size - len(head) - 1) + "\n"
    assert len(line.encode()) == size, (len(line), size)
    print(ask(sock, line), flush=True)  # 'put_result rc=0' even where Slurm dropped it
    print(ask(sock, "cmd=barrier_in\n"), flush=True)
    got = ask(sock, f"cmd=get kvsname={kvs} key={key}\n")
    stored = got.split("value=", 1)[1] if " rc=0 " in f"{got} " and "value=" in got else None
    print(f"stored {len(stored) if stored is not None else 'nothing'} of "
          f"{size - len(head) - 1} value bytes", flush=True)
    if stored is None:  # as an MPI library waits for a peer's address that never comes
        signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
