"""Resolution: launcher variables and MPI -> per-rank records -> cross-check -> layout.

Everything here but the injected ``transport``, ``probe``, ``hostname`` and ``ports`` is pure,
so the command line (which must not import TensorFlow) and MPIClusterResolver give the same
answer. ``resolve_job`` is the one front door: plan, then resolve along one of two paths,
from Slurm's variables alone or with the MPI exchange.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from mpi_resolver.network.address_names import node_names
from mpi_resolver.placement.addresses import with_names
from mpi_resolver.exchange.crosscheck import raise_mismatch
from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.exchange.collectives import MpiFacts, Transport, gather_facts
from mpi_resolver.gpus.allocation import GpuAllocation
from mpi_resolver.gpus.lists import Gpus
from mpi_resolver.gpus.discovery import probe_gpus
from mpi_resolver.resolve.gpu_resolution import (Probe, for_record, gpus_from_node,
                                                 gpus_from_records, gpus_before_mpi,
                                                 gpus_from_slurm, node_summary)
from mpi_resolver.placement.host_names import HostIndex
from mpi_resolver.placement.layout import Layout, Runs, build_layout_runs, mpi_runs, runs_of
from mpi_resolver.launch.mpi_library import MpiLibrary
from mpi_resolver.options import Options
from mpi_resolver.resolve.plan import Plan, make_plan
from mpi_resolver.network.port_sockets import SocketPorts
from mpi_resolver.network.proxies import PROXY_VARIABLES, capture_message, proxy_capture
from mpi_resolver.network.ports import Ports, Release, check_own_port, pick_port, slurm_port_base
from mpi_resolver.exchange.records import RankRecord, local_record
from mpi_resolver.launch.slurm_step import (SlurmStep, SlurmView, read_slurm, slurm_truth, step_of,
                                            why_not_tf)


@dataclass(kw_only=True)
class Resolution:
    """The answer for one rank: its task, the job's layout and every rank's GPUs."""

    rank: int
    layout: Layout
    gpus: GpuAllocation
    source: str                                 # 'slurm' or 'mpi'
    records: Optional[List[RankRecord]] = None  # every rank's record, when MPI was used
    verified: bool = False
    notes: List[str] = field(default_factory=list)
    proxy: Optional[str] = None  # a proxy variable gRPC would send peers' traffic to (_proxies)

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


def resolve_job(opts: Options, env: Dict[str, str], *,
                library: Callable[[], Optional[MpiLibrary]] = lambda: None,
                have_comm: bool = False, mpi_running: bool = False,
                warn: Callable[[Sequence[str]], None] = lambda warnings: None,
                transport: Optional[Callable[[], Transport]] = None, probe: Probe = probe_gpus,
                hostname: Callable[[], str] = socket.gethostname, details: bool = False,
                ports: Optional[Ports] = None,
                before_mpi: Optional[Callable[[Gpus], None]] = None) -> Resolution:
    """Returns this rank's Resolution: plan (``library``, ``have_comm``, ``mpi_running``:
    see _plan.plan), ``warn(the plan's warnings)`` before MPI may start, then resolve.

    Raises:
      ResolutionError, FormatError, MismatchError: see plan and resolve.
    """
    plan = make_plan(opts, env, have_comm=have_comm, mpi_running=mpi_running, library=library)
    warn(plan.warnings)
    return resolve(opts, plan=plan, transport=transport, probe=probe,
                   hostname=hostname, details=details, ports=ports, before_mpi=before_mpi)


def resolve(opts: Options, *, plan: Plan, transport: Optional[Callable[[], Transport]],
            probe: Probe, hostname: Callable[[], str], details: bool,
            ports: Optional[Ports],
            before_mpi: Optional[Callable[[Gpus], None]] = None) -> Resolution:
    """Returns this rank's Resolution from the variables of ``plan``: Slurm's variables
    and the MPI exchange -> cross-check -> placement -> layout -> GPUs.

    ``transport()`` starts MPI and is called once, where ``plan`` uses MPI (see
    _exchange.py); ``details`` gathers every rank's record even where all agree (the command
    line's reports). ``probe()`` counts this node's GPUs where nothing else says. ``ports``
    tries this host's ports (SocketPorts): this rank's own port must be free (_ports.py).
    ``before_mpi(GPUs)`` is called before MPI starts with this rank's GPUs where Slurm's
    variables give them (gpu_resolution.gpus_before_mpi).

    Raises:
      ResolutionError, FormatError, MismatchError: with the variable or argument and the fix;
        every rank of an exchange raises alike.
    """
    ports = ports or SocketPorts()
    if not plan.use_mpi:
        return _proxied(plan, _addressed(opts, _from_slurm(opts, plan, probe, ports), None))
    if transport is None:
        raise ResolutionError("internal: MPI is needed but no transport was given.")
    return _proxied(plan, _addressed(opts, _with_mpi(opts, plan, transport, probe, hostname,
                                                     details, ports, before_mpi), transport))


def _proxied(plan: Plan, res: Resolution) -> Resolution:
    """Returns ``res`` with the proxy gRPC would send its peers' traffic to, if any, said in
    ``proxy`` and in a note (the resolver logs notes as warnings)."""
    if not any(name in plan.env for name in PROXY_VARIABLES):
        return res  # the common case, without reading every address
    capture = proxy_capture(plan.env, res.layout.addresses)
    if capture is None:
        return res
    message = capture_message(capture)
    return replace(res, proxy=message, notes=res.notes + [message])


def _addressed(opts: Options, res: Resolution, transport: Optional[Callable[[], Transport]]
               ) -> Resolution:
    """Returns ``res`` with the addresses the ``address`` rule gives (address_names)."""
    if opts.address.kind == "host":
        return res
    placement = res.layout.placement
    names = node_names(opts.address, list(dict.fromkeys(placement)), placement, res.rank,
                       transport)
    return replace(res, layout=with_names(res.layout, names))


def _notes(plan: Plan, *more: Optional[str]) -> List[str]:
    return list(plan.notes + plan.warnings) + [n for n in more if n]


def _from_slurm(opts: Options, plan: Plan, probe: Probe, ports: Ports) -> Resolution:
    """Returns the Resolution from this task's Slurm variables alone (no MPI)."""
    env = plan.env
    step = SlurmStep(env)
    view = read_slurm(opts, step)
    runs = slurm_truth(view, step, plan.launch.name)
    layout = _layout(opts, runs, slurm_port_base(opts, env, runs))
    check_own_port(opts, env, layout, view.rank, ports, plan.launch)
    host, index = layout.host_of(view.rank)
    gpus = gpus_from_slurm(opts, env, host, index, layout.tasks_per_host, probe)
    return Resolution(rank=view.rank, layout=layout, gpus=gpus, source="slurm",
                      notes=_notes(plan, why_not_tf(runs, view.tf_assumed, step))
                      + list(gpus.notes))


def _with_mpi(opts: Options, plan: Plan, transport: Callable[[], Transport],
              probe: Probe, hostname: Callable[[], str], details: bool,
              ports: Ports, before_mpi: Optional[Callable[[Gpus], None]]) -> Resolution:
    """Returns the Resolution the MPI exchange gives, checked against Slurm's variables
    where the plan reads them."""
    step = step_of(plan.env)
    facts, view = _exchange(opts, plan, step, transport, probe, hostname, details, ports,
                            before_mpi)
    if view is not None and step is not None:  # the plan reads Slurm (a failed read raised)
        rank, runs = view.rank, _runs_named_by_slurm(view, facts)
        notes = _notes(plan, why_not_tf(runs, view.tf_assumed, step))
    else:
        assert facts.hosts is not None  # without Slurm, the exchange gathers every host
        rank, runs = facts.rank, mpi_runs(facts.hosts, opts.tasks_per_node)
        notes = _notes(plan)
    layout = _mpi_layout(opts, runs, facts)
    if facts.records is not None:
        gpus = gpus_from_records(opts, layout, facts.records)
    else:
        gpus = gpus_from_node(opts, layout.host_of(rank)[0], facts.node, facts.per_task,
                              facts.counts)
    return Resolution(rank=rank, layout=layout, gpus=gpus,
                      source="slurm" if plan.use_slurm else "mpi", records=facts.records,
                      verified=plan.verify, notes=notes + list(gpus.notes))


def _runs_named_by_slurm(view: SlurmView, facts: MpiFacts) -> Runs:
    """Returns where ranks run: Slurm's placement where the exchange verified it, else where
    MPI ranks run, named as Slurm names the nodes."""
    if facts.hosts is None:
        assert view.runs is not None  # the exchange: Slurm's placement held on every rank
        return view.runs
    index = HostIndex(view.hosts)
    named = {h: index.find(h) or h for h in dict.fromkeys(facts.hosts)}
    return runs_of([named[h] for h in facts.hosts])


def _layout(opts: Options, runs: Runs, port_base: int,
            ports: Optional[Sequence[int]] = None) -> Layout:
    jobs = opts.jobs if opts.jobs is not None else {"worker": sum(n for _, n in runs)}
    return build_layout_runs(runs, jobs=jobs, port_base=port_base, ports=ports)


def _mpi_layout(opts: Options, runs: Runs, facts: MpiFacts) -> Layout:
    """Returns the layout with the ports the exchange agreed on."""
    if facts.ports is not None:    # 'auto': every rank's own port
        return _layout(opts, runs, min(facts.ports), facts.ports)
    if facts.port_base is not None:  # 'auto': every rank got the base + its index
        return _layout(opts, runs, facts.port_base)
    assert isinstance(opts.port_base, int)  # 'auto' always comes with ports or a base
    return _layout(opts, runs, opts.port_base)


def _exchange(opts: Options, plan: Plan, step: Optional[SlurmStep],
              transport: Callable[[], Transport], probe: Probe, hostname: Callable[[], str],
              details: bool, ports: Ports, before_mpi: Optional[Callable[[Gpus], None]] = None
              ) -> Tuple[MpiFacts, Optional[SlurmView]]:
    """Returns what the MPI exchange says, and Slurm's view where the plan reads it; raises
    alike on every rank: a rank's own error, or MismatchError where Slurm and MPI (or the
    ranks' plans) disagree. Under port_base='auto' each rank listens on the port it picked
    until the exchange is over, so that the ranks of a node pick different ones."""
    view, error = None, None
    if plan.use_slurm and step is not None:  # a plan that reads Slurm is in a step
        try:
            view = read_slurm(opts, step)
        except ResolutionError as e:  # every rank must learn it: carried in the record
            error = f"{type(e).__name__}: {e}"
    if before_mpi is not None and view is not None:
        early = gpus_before_mpi(opts, plan.env, view.runs, view.rank)
        if early is not None:
            before_mpi(early)
    t = transport()
    release: Optional[Release] = None
    try:
        facts, release = _gather(opts, plan, view, error, t, probe, hostname(), details,
                                 ports)
    finally:
        if release is not None:
            release()
        t.close()
    _raise_what_ranks_met(facts, plan, step)
    return facts, view


def _gather(opts: Options, plan: Plan, view: Optional[SlurmView], error: Optional[str],
            t: Transport, probe: Probe, host: str, details: bool, ports: Ports
            ) -> Tuple[MpiFacts, Optional[Release]]:
    """Returns (the facts of the exchange, what releases this rank's picked port): this
    rank's port picked and its record made, then gather_facts."""
    port = release = aimed_base = None
    if error is None:
        try:
            port, release, aimed_base = pick_port(
                opts, plan.env, max(view.counts) if view is not None else None, plan.launch,
                host, t.rank, ports)
        except ResolutionError as e:
            error = str(e)
    discover = for_record(opts, plan.env, probe, plan.launch.local_rank in (0, None))
    record = local_record(plan.env, plan.launch, t.rank, t.size, host, discover,
                          plan=plan.uses, error=error, port=port)
    facts = gather_facts(t, record, slurm_runs=view.runs if view else None,
                         node_summary=lambda records: node_summary(opts, records),
                         details=details, aimed_base=aimed_base)
    return facts, release


def _raise_what_ranks_met(facts: MpiFacts, plan: Plan, step: Optional[SlurmStep]) -> None:
    """Raises, alike on every rank, what the gathered records show: Slurm and MPI (or the
    ranks' plans) disagreeing, a rank's own error, 'auto' ports on some ranks only."""
    records = facts.records
    if records is not None and (plan.verify or any(r.plan != records[0].plan
                                                       for r in records)):
        raise_mismatch(records, step)  # the table says more than a rank's own error
    for r in records if records is not None else facts.node:
        if r.error:
            raise ResolutionError(f"rank {r.rank} on {r.host}: {r.error}")
    if records is not None:
        picked = [r.rank for r in records if r.port is not None]
        if picked and len(picked) < len(records):
            raise ResolutionError(
                f"port_base='auto' on {len(picked)} of {len(records)} ranks (first: rank "
                f"{picked[0]}) but a number on the others; pass the same port_base on every "
                "rank.")
