"""Resolution: launcher variables and MPI -> per-rank records -> cross-check -> layout.

Everything here but the injected ``exchange`` and ``probe`` callables is pure, so the command
line (which must not import TensorFlow) and MPIClusterResolver give the same answer.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._gpu_allocation import (NO_LIMIT, GpuAllocation, SlurmGpus, allocate_nodes, allocate_own,
                      allocate_uniform, conflicts, divided_fit, group_lists, is_bound,
                      needs_probe, task_gpus)
from ._errors import FormatError, MismatchError, ResolutionError
from ._gpu_discovery import parse_visible_devices, probe_gpus
from ._hostlist import check_host_name
from ._host_names import HostIndex
from ._launchers import (MPIRUN_LAUNCHERS, MpiLaunch, MpiLibrary, SlurmStep, batch_step_view,
                        check_pairing,
                        detect_mpi_launch, placement_fix, slurm_describes_ranks, srun_advice)
from ._layout import (Layout, Runs, build_layout_runs, check_own_placement, count_per_host,
                     count_runs, expand_runs, runs_of, slurm_runs, tf_runs)
from ._options import Options
from ._ports import (ROOM, Ports, Release, SocketPorts, auto_base, claim, in_use, job_key,
                    step_key, wrap)
from ._exchange import RECORD_BYTES, MpiFacts, Transport, gather_facts
from ._srun_pmi import check_intel_placement, pmi1_warnings
from ._records import RankRecord, compare, format_table, likely_cause, make_record

__all__ = ["Plan", "plan", "Resolution", "resolve", "local_record"]

#: probe() -> (GPUs on this node, True when it is CPU-only); see gpus.probe_gpus.
Probe = Callable[[], Tuple[int, bool]]


@dataclass(frozen=True)
class Plan:
    """Which sources a resolution uses: decided from the options and variables alone."""

    use_slurm: bool          # Slurm's step variables give rank, tasks and nodes
    use_mpi: bool            # MPI is started and every rank's record exchanged
    verify: bool             # Slurm and MPI are compared
    launch: MpiLaunch
    notes: Tuple[str, ...]   # one-line logs (why a source was chosen, a skipped check)
    #: what to say before MPI starts, as MPI_Init may hang or abort (srun_pmi's faults)
    warnings: Tuple[str, ...] = ()

    @property
    def uses(self) -> str:
        """Returns what the resolution reads: 'slurm' or 'mpi', '+check' where it compares
        Slurm with MPI."""
        return ("slurm" if self.use_slurm else "mpi") + ("+check" if self.verify else "")


def plan(opts: Options, env: Mapping[str, str], *, have_comm: bool = False,
         mpi_running: bool = False,
         library: Callable[[], Optional[MpiLibrary]] = lambda: None) -> Plan:
    """Returns the sources to use.

    Raises:
      ResolutionError: source='mpi' or verify=True where MPI cannot be started safely,
        verify=True where there is no Slurm step to check, or the batch step of a job of
        several tasks (see launchers.batch_step_view).
    """
    env, batch_note = batch_step_view(env)
    launch = detect_mpi_launch(env)
    in_step = SlurmStep.present(env)
    slurm_ranks = slurm_describes_ranks(env, launch)
    notes: List[str] = [batch_note] if batch_note else []
    # The MPI mpi4py loads, read without starting it, where srun's plugin must fit it or the
    # advice depends on it (``library()`` imports nothing under source='slurm').
    lib = None
    if opts.source != "slurm" and in_step and launch.name in ("pmix", "pmi2", None) \
            and not (have_comm or mpi_running):
        lib = library()
    # MPI may be started unless this is a Slurm task without MPI wiring (srun --mpi=none):
    # there MPI_Init can abort the process or start a silent world of one.
    mpi_ok = opts.source != "slurm" and (have_comm or mpi_running or launch.wired or
                                         not in_step)
    if opts.source == "slurm":
        use_slurm = True
    elif opts.source == "mpi":
        use_slurm = False
        if not mpi_ok:
            raise ResolutionError(
                "source='mpi', but this process is a Slurm task without MPI wiring (no "
                "PMIX_RANK, PMI_RANK or OMPI_COMM_WORLD_RANK): starting MPI here would give "
                "each task a world of its own. Launch with "
                f"{srun_advice(launch.name, lib)}, or use source='slurm'.")
    else:
        use_slurm = slurm_ranks
        if in_step and not slurm_ranks:
            notes.append(
                f"mpirun/mpiexec ({launch.name}) inside a Slurm allocation: SLURM_PROCID and "
                "SLURM_STEP_NUM_TASKS describe its launcher daemons, not the ranks; using MPI.")
    if opts.verify is True:
        if not in_step:
            raise ResolutionError(
                "verify=True: there is no Slurm step to check against MPI (SLURM_PROCID is "
                f"not set). Run under {srun_advice(launch.name, lib)}, or use verify='auto'.")
        if not mpi_ok:
            why = ("source='slurm' never starts MPI" if opts.source == "slurm" else
                   "this Slurm task has no MPI wiring (srun --mpi=none?)")
            raise ResolutionError(
                f"verify=True needs MPI, but {why}. Launch with {srun_advice(launch.name, lib)} "
                "and source='auto', or use verify='auto'.")
        verify = True
    elif opts.verify == "auto":
        verify = slurm_ranks and mpi_ok
        if slurm_ranks and not mpi_ok and opts.source != "slurm" and not batch_note:
            notes.append(
                "Slurm step without MPI wiring (no PMIX_RANK or PMI_RANK): the cross-check of "
                f"Slurm against MPI is skipped. Launch with {srun_advice(launch.name, lib)} to "
                "enable it, or pass verify=False to silence this.")
    else:
        verify = False
    warnings: List[str] = []
    if (not use_slurm) or verify:  # before MPI_Init, which would abort or hang
        check_pairing(launch, lib)
        intel = check_intel_placement(launch, lib, env)
        warnings += ([intel] if intel else []) + pmi1_warnings(launch, lib, env)
    return Plan(use_slurm, (not use_slurm) or verify, verify, launch, tuple(notes),
                tuple(warnings))


@dataclass
class Resolution:
    """The answer for one rank: its task, the job's layout and every rank's GPUs."""

    rank: int
    layout: Layout
    gpus: GpuAllocation
    source: str                                 # 'slurm' or 'mpi'
    records: Optional[List[RankRecord]] = None  # every rank's record, when MPI was used
    verified: bool = False
    notes: List[str] = field(default_factory=list)

    @property
    def num_tasks(self) -> int:
        """Returns the number of tasks (ranks) in the job."""
        return len(self.layout.addresses)

    @property
    def task_configuration(self) -> Dict[str, int]:
        """Returns {host: tasks on it}, hosts in order of first rank."""
        return dict(self.layout.tasks_per_host)

    @property
    def task(self) -> Tuple[str, int]:
        """Returns this rank's (task_type, task_id)."""
        return self.layout.task_of(self.rank)

    def gpus_of(self, rank: int) -> Tuple[Optional[Tuple[str, ...]], str]:
        """Returns (GPUs, how they were given) of ``rank``; (None, 'unknown') where this rank
        cannot know (another rank's Slurm binding, without MPI)."""
        return self.gpus.at(*self.layout.host_of(rank))

    @property
    def own_gpus(self) -> Tuple[str, ...]:
        """Returns this rank's GPUs (CUDA_VISIBLE_DEVICES entries)."""
        return self.gpus_of(self.rank)[0] or ()

    @property
    def visible_devices(self) -> str:
        """Returns the CUDA_VISIBLE_DEVICES value for this rank."""
        return ",".join(self.own_gpus)

    def cluster(self) -> Dict[str, List[str]]:
        """Returns {job: [addresses]} (the ClusterSpec as a dict)."""
        return self.layout.cluster

    def tf_config(self) -> dict:
        """Returns the TF_CONFIG structure for this rank."""
        task_type, task_id = self.task
        return {"cluster": self.cluster(), "task": {"type": task_type, "index": task_id}}


def _discover(opts: Options, env: Mapping[str, str], probe: Probe, may_probe: bool
              ) -> Tuple[Optional[Tuple[str, ...]], SlurmGpus, Optional[int], bool]:
    """Returns what this task finds out about its GPUs: (CUDA_VISIBLE_DEVICES entries, Slurm's
    GPU variables, nvidia-smi's count, CPU-only); nvidia-smi runs only where ``may_probe`` and
    neither CUDA_VISIBLE_DEVICES nor Slurm nor gpus_per_node says."""
    visible = parse_visible_devices(env.get("CUDA_VISIBLE_DEVICES"))
    slurm = SlurmGpus.read(env)
    probed, cpu_only = None, False
    if may_probe and needs_probe(visible, slurm, opts.gpus_per_node):
        probed, cpu_only = probe()
    return visible, slurm, probed, cpu_only


def local_record(opts: Options, env: Mapping[str, str], launch: MpiLaunch, rank: int,
                 size: int, host: str, probe: Probe = probe_gpus, *,
                 plan: Optional[str] = None, error: Optional[str] = None,
                 port: Optional[int] = None) -> RankRecord:
    """Returns this rank's record; nvidia-smi runs only on the node's first local rank. An
    error (``error``, or one met here) is carried in the record, so that every rank raises it;
    a record too long for the exchange is replaced by one that says so."""
    visible = probed = None
    cpu_only = False
    if error is None:
        try:
            visible, _, probed, cpu_only = _discover(opts, env, probe,
                                                     launch.local_rank in (0, None))
        except ResolutionError as e:
            error = str(e)
    record = make_record(rank, size, host, env, launch, visible, probed, error, cpu_only, plan,
                         port)
    length = len(record.wire)
    if length > RECORD_BYTES:
        record = replace(record, visible=None, error=(
            f"its record is {length} bytes, more than the {RECORD_BYTES} the exchange allows "
            "(CUDA_VISIBLE_DEVICES too long?); pass gpus_per_node."))
    return record


@dataclass(frozen=True)
class _SlurmView:
    """What Slurm's step variables say of the job, read once."""

    rank: int
    hosts: List[str]
    counts: List[int]
    tf_assumed: Runs       # where TensorFlow's resolver puts the ranks
    runs: Optional[Runs]   # where Slurm put them, where its variables say
    declared: bool         # tasks_per_node was given: the layout is the caller's


def _read_slurm(opts: Options, step: SlurmStep) -> _SlurmView:
    """Returns what Slurm's step variables say, checked against each other.

    Raises:
      ResolutionError, FormatError: a variable missing, malformed or contradicting another.
    """
    rank = step.procid()
    hosts, counts = _slurm_configuration(opts, step)
    total = sum(counts)
    if opts.jobs is None and opts.tasks_per_node is None:
        num_tasks = step.num_tasks()
        if num_tasks != total:
            raise FormatError(
                f"SLURM_STEP_NUM_TASKS={num_tasks} but SLURM_STEP_TASKS_PER_NODE="
                f"{step.env.get('SLURM_STEP_TASKS_PER_NODE')!r} adds up to {total}; "
                "they must agree.")
    if rank >= total:
        raise ResolutionError(
            f"SLURM_PROCID={rank} is outside the step's {total} tasks (0..{total - 1}).")
    tf_assumed = tf_runs(dict(zip(hosts, counts, strict=True)))
    if opts.tasks_per_node is not None:
        runs: Optional[Runs] = tf_assumed  # the caller declared the layout, as in TensorFlow
    else:
        runs = slurm_runs(hosts, counts, step.distribution())
    return _SlurmView(rank, hosts, counts, tf_assumed, runs, opts.tasks_per_node is not None)


def resolve(opts: Options, env: Mapping[str, str], *, the_plan: Plan,
            transport: Optional[Callable[[], Transport]] = None, probe: Probe = probe_gpus,
            hostname: Callable[[], str] = socket.gethostname,
            details: bool = False, ports: Optional[Ports] = None) -> Resolution:
    """Returns this rank's Resolution: Slurm's variables and the MPI exchange -> cross-check
    -> placement -> layout -> GPUs.

    ``transport()`` starts MPI and is called once, where ``the_plan`` uses MPI (see
    protocol.py); ``details`` gathers every rank's record even where all agree (the command
    line's reports). ``probe()`` counts this node's GPUs where nothing else says. ``ports``
    tries this host's ports (SocketPorts): this rank's own port must be free (ports.py).

    Raises:
      ResolutionError, FormatError, MismatchError: with the variable or argument and the fix;
        every rank of an exchange raises alike.
    """
    notes = list(the_plan.notes + the_plan.warnings)
    env, _ = batch_step_view(env)  # plan() noted it
    step = SlurmStep(env) if SlurmStep.present(env) else None
    ports = ports or SocketPorts()
    if not the_plan.use_mpi:
        alone = _read_slurm(opts, step or SlurmStep(env))
        runs = _slurm_truth(alone, step or SlurmStep(env), the_plan.launch.name)
        layout = _layout(opts, runs, _slurm_port_base(opts, env, runs))
        _check_own_port(opts, env, layout, alone.rank, ports, the_plan.launch)
        gpus = _gpus_from_slurm(opts, env, layout, alone.rank, probe)
        note = _why_not_tf(runs, alone.tf_assumed, step or SlurmStep(env))
        return Resolution(alone.rank, layout, gpus, "slurm", None, False,
                          notes + ([note] if note else []) + list(gpus.notes))
    facts, view = _exchange(opts, env, the_plan, step, transport, probe, hostname, details,
                            ports)
    if the_plan.use_slurm:
        assert view is not None and step is not None  # a rank whose read failed raised above
        rank = view.rank
        if facts.hosts is None:
            assert view.runs is not None  # protocol: Slurm's placement held on every rank
            runs = view.runs
        else:  # where MPI ranks run, named as Slurm names the nodes
            index = HostIndex(view.hosts)
            names: Dict[str, str] = {}
            runs = runs_of([names.get(h) or names.setdefault(h, index.find(h) or h)
                            for h in facts.hosts])
        note = _why_not_tf(runs, view.tf_assumed, step)
        notes += [note] if note else []
    else:
        rank = facts.rank
        assert facts.hosts is not None  # without Slurm, the protocol gathers every host
        runs = _mpi_runs(opts, facts.hosts)
    if facts.ports is not None:    # 'auto': every rank's own port
        layout = _layout(opts, runs, min(facts.ports), facts.ports)
    elif facts.port_base is not None:  # 'auto': every rank got the base + its index
        layout = _layout(opts, runs, facts.port_base)
    else:
        assert isinstance(opts.port_base, int)  # 'auto' always comes with ports or a base
        layout = _layout(opts, runs, opts.port_base)
    if facts.records is not None:
        gpus = _gpus_from_records(opts, layout, facts.records)
    else:
        gpus = _gpus_from_node(opts, layout.host_of(rank)[0], facts.node, facts.per_task)
    return Resolution(rank, layout, gpus, "slurm" if the_plan.use_slurm else "mpi",
                      facts.records, the_plan.verify, notes + list(gpus.notes))


def _layout(opts: Options, runs: Runs, port_base: int,
            ports: Optional[Sequence[int]] = None) -> Layout:
    jobs = opts.jobs if opts.jobs is not None else {"worker": sum(n for _, n in runs)}
    return build_layout_runs(runs, jobs=jobs, port_base=port_base, ports=ports)


_FIX_FIXED = ("Pass port_base='auto' (mpi-resolver --port-base auto): with MPI each node's "
              "ranks pick ports free there, without it they are derived from the job and "
              "step; or pass another port_base.")


def _slurm_port_base(opts: Options, env: Mapping[str, str], runs: Runs) -> int:
    """Returns the port_base of a resolution from Slurm's variables alone: the given one, or
    for 'auto' the one SLURM_JOB_ID and SLURM_STEP_ID give (ports.auto_base)."""
    if isinstance(opts.port_base, int):
        return opts.port_base
    key = step_key(env)
    if key is None:
        raise ResolutionError(
            "port_base='auto' without MPI derives the ports from SLURM_JOB_ID and "
            "SLURM_STEP_ID, but SLURM_JOB_ID is not set; launch with MPI (srun --mpi=pmix, "
            "mpirun) or pass a number as port_base.")
    return auto_base(key, max(count_runs(runs).values()))


def _check_free(ports: Ports, port: int, host: str, how: str, fix: str) -> None:
    """Raises ResolutionError (ports.in_use) where another process listens on ``port`` here."""
    release = ports.hold(port)
    if release is not None:
        release()
    elif not ports.ours(port):  # this process's own server (an earlier resolver's) is fine
        raise ResolutionError(in_use(port, host, how, fix))


def _check_own_port(opts: Options, env: Mapping[str, str], layout: Layout, rank: int,
                    ports: Ports, launch: MpiLaunch) -> None:
    """Raises ResolutionError where this rank's port (from Slurm's variables alone) is in
    use; without MPI the ranks cannot move to other ports together, so the message says how
    to launch with it."""
    if isinstance(opts.port_base, int):
        how, fix = f"port_base={opts.port_base}", _FIX_FIXED
    else:
        how = (f"port_base='auto' from SLURM_JOB_ID and SLURM_STEP_ID {step_key(env)}, "
               "without MPI")
        how_mpi = ("leave out source='slurm' (--source slurm)" if launch.wired else
                   f"launch with {srun_advice(launch.name, None)}")
        fix = (f"Without MPI the ranks cannot agree on other ports: {how_mpi} so that they "
               "pick free ports together, or pass a free port_base.")
    _check_free(ports, layout.port_of(rank), layout.host_of(rank)[0], how, fix)


def _pick_port(opts: Options, env: Mapping[str, str], view: Optional[_SlurmView],
               launch: MpiLaunch, host: str, rank: int, ports: Ports
               ) -> Tuple[Optional[int], Optional[Release], Optional[int]]:
    """Returns (the port this rank now listens on, what releases it, the base it aimed at)
    for port_base='auto'; (None, None, None) for a number, after checking this rank's own
    port where the launcher says its index on the node.

    Raises:
      ResolutionError: that port is in use, or no free port was found (ports.claim).
    """
    local = launch.local_rank
    if isinstance(opts.port_base, int):
        port = opts.port_base + (local or 0)
        if local is not None and port <= 65535:
            _check_free(ports, port, host, f"port_base={opts.port_base} + local rank {local}",
                        _FIX_FIXED)
        return None, None, None
    key = job_key(env, mpirun=launch.name in MPIRUN_LAUNCHERS)
    base = auto_base(key, max(view.counts) if view is not None else ROOM)
    port, release = claim(ports, wrap(base + (local or 0)), f"{key}/{host}/{rank}", host)
    return port, release, base


def _exchange(opts: Options, env: Mapping[str, str], the_plan: Plan,
              step: Optional[SlurmStep], transport: Optional[Callable[[], Transport]],
              probe: Probe, hostname: Callable[[], str], details: bool, ports: Ports
              ) -> Tuple[MpiFacts, Optional[_SlurmView]]:
    """Returns what the MPI exchange says, and Slurm's view where the plan reads it; raises
    alike on every rank: a rank's own error, or MismatchError where Slurm and MPI (or the
    ranks' plans) disagree. Under port_base='auto' each rank listens on the port it picked
    until the exchange is over, so that the ranks of a node pick different ones."""
    if transport is None:
        raise ResolutionError("internal: MPI is needed but no transport was given.")
    view, error = None, None
    if the_plan.use_slurm:
        try:
            view = _read_slurm(opts, step or SlurmStep(env))
        except ResolutionError as e:  # every rank must learn it: carried in the record
            error = f"{type(e).__name__}: {e}"
    t = transport()
    port = release = aim = None
    try:
        host = hostname()
        if error is None:
            try:
                port, release, aim = _pick_port(opts, env, view, the_plan.launch, host, t.rank,
                                                ports)
            except ResolutionError as e:
                error = str(e)
        mine = local_record(opts, env, the_plan.launch, t.rank, t.size, host, probe,
                            plan=the_plan.uses, error=error, port=port)
        facts = gather_facts(t, mine, slurm_runs=view.runs if view else None,
                             node_summary=lambda node: _node_summary(opts, node),
                             details=details, aim=aim)
    finally:
        if release is not None:
            release()
        close = getattr(t, "close", None)
        if close is not None:
            close()
    if facts.records is not None and (the_plan.verify or any(
            r.plan != facts.records[0].plan for r in facts.records)):
        _mismatch(facts.records, step)  # the table says more than a rank's own error
    checked = facts.records if facts.records is not None else facts.node
    for r in checked:
        if r.error:
            raise ResolutionError(f"rank {r.rank} on {r.host}: {r.error}")
    if facts.records is not None:
        picked = [r.rank for r in facts.records if r.port is not None]
        if picked and len(picked) < len(facts.records):
            raise ResolutionError(
                f"port_base='auto' on {len(picked)} of {len(facts.records)} ranks (first: rank "
                f"{picked[0]}) but a number on the others; pass the same port_base on every "
                "rank.")
    return facts, view


def _node_summary(opts: Options, node: List[RankRecord]) -> Tuple[int, bool]:
    """Returns (the GPUs per task this node's ranks could divide, or NO_LIMIT; whether the
    node has a problem every rank must see: GPU lists that conflict, or cannot be given)."""
    try:
        lists = _task_lists(opts, [r.host for r in node], node)[node[0].host]
        allocate_nodes({node[0].host: lists}, opts.gpus_per_task)
    except ResolutionError:
        return NO_LIMIT, True
    return divided_fit(group_lists(lists)), bool(_gpu_conflicts(node))


def _mpi_runs(opts: Options, placement: List[str]) -> Runs:
    """Returns where MPI ranks run (``placement``: every rank's host), as runs, checked
    against a given tasks_per_node."""
    runs = runs_of(placement)
    start = 0
    checked = set()
    for host, n in runs:  # each host once, named by its first rank
        if host not in checked:
            check_host_name(host, what=f"host name of MPI rank {start}")
            checked.add(host)
        start += n
    if opts.tasks_per_node is not None:
        _check_declared(opts.tasks_per_node, placement)
    return runs


def _slurm_configuration(opts: Options, step: SlurmStep) -> Tuple[List[str], List[int]]:
    """Returns (hosts, tasks per host) as TensorFlow would read them, checked."""
    if isinstance(opts.tasks_per_node, dict):
        hosts = list(opts.tasks_per_node)
        if "SLURM_STEP_NODELIST" in step.env:
            known = HostIndex(step.hostlist())
            unknown = [h for h in hosts if known.find(h) is None]
            if unknown:
                raise ResolutionError(
                    f"tasks_per_node names {', '.join(unknown)}, which are not in "
                    f"SLURM_STEP_NODELIST={step.env['SLURM_STEP_NODELIST']!r}; name the "
                    "step's nodes, or leave tasks_per_node unset to read them from Slurm.")
        return hosts, list(opts.tasks_per_node.values())
    hosts = step.hostlist()
    seen = set()
    for h in hosts:
        if h in seen:
            raise FormatError(
                f"SLURM_STEP_NODELIST={step.env['SLURM_STEP_NODELIST']!r} lists {h} twice; a "
                "step's node list names each node once.")
        seen.add(h)
    if isinstance(opts.tasks_per_node, int):
        return hosts, [opts.tasks_per_node] * len(hosts)
    counts = step.tasks_per_node()
    if len(counts) != len(hosts):
        raise FormatError(
            f"SLURM_STEP_NODELIST={step.env['SLURM_STEP_NODELIST']!r} has {len(hosts)} nodes "
            f"but SLURM_STEP_TASKS_PER_NODE={step.env['SLURM_STEP_TASKS_PER_NODE']!r} has "
            f"{len(counts)} entries; they must describe the same nodes.")
    return hosts, counts


def _slurm_truth(view: _SlurmView, step: SlurmStep, launcher: Optional[str]) -> Runs:
    """Returns where ranks run, from Slurm's variables alone, checked against this rank's own
    SLURMD_NODENAME and SLURM_GTIDS; raises MismatchError where they cannot say."""
    if view.runs is None:
        raise MismatchError(
            f"SLURM_DISTRIBUTION={step.env.get('SLURM_DISTRIBUTION')!r}: Slurm's step "
            "variables do not say on which node each rank runs, and TensorFlow's "
            "block layout would give ranks addresses on hosts where they do not run. "
            + placement_fix(launcher))
    if not view.declared:
        check_own_placement(view.runs, view.rank, step.nodename(), step.gtids(),
                            placement_fix(launcher))
    return view.runs


def _mismatch(records: List[RankRecord], step: Optional[SlurmStep]) -> None:
    """Raises MismatchError when Slurm and MPI disagree about any rank."""
    diffs = compare(records, step)
    if not diffs:
        return
    slurm_tasks = None
    if step is not None and step.env.get("SLURM_STEP_NUM_TASKS", "").isdigit():
        slurm_tasks = int(step.env["SLURM_STEP_NUM_TASKS"])
    cause = likely_cause(records, diffs, slurm_tasks)
    raise MismatchError(
        f"Slurm and MPI disagree about this job ({len(diffs)} "
        f"difference{'s' if len(diffs) != 1 else ''}).\n"
        f"{format_table(diffs)}\nLikely cause: {cause}", diffs, records)


def _why_not_tf(runs: Runs, tf_assumed: Runs, step: SlurmStep) -> Optional[str]:
    """Returns the one-line note that says why the layout (``runs``: where ranks run) differs
    from TensorFlow's (``tf_assumed``), or None where it does not."""
    if runs == tf_assumed:
        return None
    placement, tf = expand_runs(runs), expand_runs(tf_assumed)
    first = next(i for i, (a, b) in enumerate(zip(placement, tf, strict=True)) if a != b)
    nodes = step.env.get("SLURM_STEP_NODELIST", "?")
    nodes = nodes if len(nodes) <= 80 else nodes[:77] + "..."
    return (f"the ClusterSpec differs from TensorFlow's SlurmClusterResolver: it would put rank "
            f"{first} on {tf[first]}, but rank {first} runs on {placement[first]} "
            f"(SLURM_DISTRIBUTION={step.env.get('SLURM_DISTRIBUTION', 'block')}, node order "
            f"{nodes}); using where ranks run.")


def _check_declared(declared: Union[int, Mapping[str, int]], placement: List[str]) -> None:
    """Raises MismatchError when a given tasks_per_node contradicts where MPI ranks run."""
    actual = count_per_host(placement)
    expected = {h: declared for h in actual} if isinstance(declared, int) else dict(declared)
    index = HostIndex(expected)
    matched = {index.find(h): n for h, n in actual.items()}
    if matched != expected:
        raise MismatchError(
            f"tasks_per_node={declared!r} does not match where MPI ranks run: "
            f"{dict(actual)!r}. Leave tasks_per_node unset to use MPI's placement.")


def _cpu_only_note(hosts: Sequence[str]) -> str:
    shown = ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
    return (f"no GPUs found on {shown} (no nvidia-smi, no /dev/nvidia* devices, "
            "CUDA_VISIBLE_DEVICES and SLURM_GPUS_ON_NODE unset): running on CPU.")


def _ignored_note(gpus_per_node: int, bind: Optional[str]) -> str:
    how = f"SLURMD_TRES_BIND=gpu:{bind}" if bind else "fewer GPUs than SLURM_GPUS_ON_NODE"
    return (f"gpus_per_node={gpus_per_node} is ignored for tasks that Slurm bound GPUs to "
            f"({how}): each keeps the GPUs Slurm gave it.")


def _gpus_from_slurm(opts: Options, env: Mapping[str, str], layout: Layout, rank: int,
                     probe: Probe) -> GpuAllocation:
    """Returns the GPUs from this task's own variables (no MPI): its own list where Slurm
    bound GPUs to it, else its node's list, which every node is taken to have (as
    TensorFlow does)."""
    visible, slurm, probed, cpu_only = _discover(opts, env, probe, True)
    host, index = layout.host_of(rank)
    if is_bound(visible, slurm):
        assert visible is not None  # is_bound says so
        gpus = allocate_own(visible, host, index, layout.tasks_per_host[host], slurm,
                            opts.gpus_per_task)
        if opts.gpus_per_node is not None:
            return GpuAllocation(gpus.nodes, gpus.per_task,
                                 gpus.notes + (_ignored_note(opts.gpus_per_node, slurm.bind),))
        return gpus
    own = task_gpus(visible, slurm, probed, opts.gpus_per_node) or ()
    gpus = allocate_uniform(own, layout.tasks_per_host, opts.gpus_per_task, host)
    if cpu_only:
        return GpuAllocation(gpus.nodes, gpus.per_task, gpus.notes + (_cpu_only_note([host]),),
                             gpus.tasks, gpus.by_count)
    return gpus


def _task_lists(opts: Options, placement: Sequence[str], records: Sequence[RankRecord]
                ) -> Dict[str, List[Tuple[str, ...]]]:
    """Returns {host: the GPU list of each of its ranks, in rank order} (binding.task_gpus),
    nvidia-smi's count coming from the rank of that host that ran it.

    Raises:
      ResolutionError: a host none of whose ranks could say.
    """
    probed: Dict[str, int] = {}
    for host, r in zip(placement, records, strict=True):
        if r.probed is not None:
            probed.setdefault(host, r.probed)
    lists: Dict[str, List[Tuple[str, ...]]] = {}
    for host, r in zip(placement, records, strict=True):
        gpus = task_gpus(r.visible, r.slurm_gpus(), probed.get(host), opts.gpus_per_node)
        if gpus is None:
            raise ResolutionError(
                f"no rank on {host} reported its GPUs (CUDA_VISIBLE_DEVICES and "
                "SLURM_GPUS_ON_NODE unset, and no local rank 0 ran nvidia-smi); set "
                "gpus_per_node or CUDA_VISIBLE_DEVICES.")
        lists.setdefault(host, []).append(gpus)
    return lists


def _gpu_notes(opts: Options, placement: Sequence[str],
               records: Sequence[RankRecord]) -> List[str]:
    """Returns the notes on CPU-only hosts and on gpus_per_node ignored for bound tasks."""
    notes = []
    cpu_hosts = list(dict.fromkeys(h for h, r in zip(placement, records, strict=True)
                                   if r.cpu_only))
    if cpu_hosts:
        notes.append(_cpu_only_note(cpu_hosts))
    bound = next((r for r in records if is_bound(r.visible, r.slurm_gpus())), None)
    if opts.gpus_per_node is not None and bound is not None:
        notes.append(_ignored_note(opts.gpus_per_node, bound.gpu_bind))
    return notes


def _allocate(opts: Options, placement: Sequence[str], records: Sequence[RankRecord],
              divided_per_task: Optional[int] = None) -> GpuAllocation:
    """Returns the GPUs of the ranks of ``records`` (binding.allocate_nodes), with notes."""
    gpus = allocate_nodes(_task_lists(opts, placement, records), opts.gpus_per_task,
                          tasks_per_gpu=max((r.tasks_per_gpu or 0 for r in records),
                                            default=0) or None,
                          divided_per_task=divided_per_task)
    return GpuAllocation(gpus.nodes, gpus.per_task,
                         gpus.notes + tuple(_gpu_notes(opts, placement, records)))


def _gpus_from_records(opts: Options, layout: Layout,
                       records: List[RankRecord]) -> GpuAllocation:
    """Returns every rank's GPUs from every rank's record."""
    return _allocate(opts, layout.placement, records)


def _gpus_from_node(opts: Options, host: str, node: List[RankRecord],
                    per_task: Optional[int]) -> GpuAllocation:
    """Returns the GPUs of this rank's node (``node``: its ranks' records, named ``host``),
    with ``per_task`` the job's GPUs per task of divided lists (from the exchange)."""
    return _allocate(opts, [host] * len(node), node,
                     None if per_task is None or per_task >= NO_LIMIT else per_task)


def _gpu_conflicts(node: Sequence[RankRecord]) -> list:
    """Returns the GPU conflicts among one node's ranks (see topology's GPU check)."""
    return conflicts({"node": [(r.rank, r.visible, is_bound(r.visible, r.slurm_gpus()))
                               for r in node if r.visible is not None]})
