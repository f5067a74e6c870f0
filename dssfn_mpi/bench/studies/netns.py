"""Two emulated hosts on one machine: network namespaces joined by a rate-capped veth pair.

Used by ``python -m dssfn_mpi.bench.studies.links`` (root only). Each host is a
network namespace with its own address on a private /24 and its loopback up;
the veth pair between them carries everything, capped in both directions by
a ``tbf`` qdisc (``tc``). Open MPI crosses between them as between two
nodes: ``mpirun`` runs inside host a, and PRRTE starts its daemon on host b
through an ssh agent script that runs ``ip netns exec NS`` (each side also
gets a UTS namespace with its own hostname, so PRRTE sees two nodes). Only
the two hosts' addresses are ever used.

Everything is removed on every exit path: deleting a namespace deletes its
end of the veth pair (and so the pair and its qdiscs), and the agent script
lives in a temporary folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import UserError

__all__ = ["Hosts", "require_root_tools", "tbf_command"]

#: Private subnet of the two hosts (.1 is host a, .2 host b).
SUBNET = "10.231.77"


def require_root_tools() -> None:
    """Refuse, in one line, unless we are root with ``ip``, ``tc`` and ``unshare``.

    Raises
    ------
    UserError
        Not root, or a tool missing.
    """
    if os.geteuid() != 0:
        raise UserError("the links benchmark creates network namespaces and needs root; "
                        "run it as root (e.g. sudo)")
    missing = [tool for tool in ("ip", "tc", "unshare") if shutil.which(tool) is None]
    if missing:
        raise UserError(f"the links benchmark needs {', '.join(missing)} on PATH "
                        "(iproute2, util-linux)")


def tbf_command(ns: str, dev: str, rate_bits: float) -> list[str]:
    """``tc`` command capping ``dev``'s egress at ``rate_bits`` bit/s with ``tbf``.

    The bucket holds 100 us of traffic (at least two 1514-byte frames): a
    bigger one lets a message that follows a pause leave at veth speed (with
    64 kB, sync iterations of 48.6 kB at 100 Mbit/s ran in half the time the
    cap allows). The queue may hold 50 ms; TCP's window does the rest.
    """
    burst = max(2 * 1514, int(rate_bits / 8 * 100e-6))
    return ["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
            "rate", f"{int(rate_bits)}bit", "burst", str(burst), "latency", "50ms"]


def _run(cmd: list[str]) -> None:
    res = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if res.returncode != 0:
        raise UserError(f"{' '.join(cmd)} failed: {(res.stderr or res.stdout).strip()[:300]}")


_AGENT = """#!/bin/sh
# PRRTE's ssh agent for the emulated hosts: [options] HOST COMMAND... runs COMMAND in HOST's
# network namespace, under a UTS namespace with HOST's name.
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
host=$1; shift
case "$host" in
{cases}  *) echo "emulated-host agent: unknown host $host" >&2; exit 1;;
esac
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$1"; shift; exec sh -c "$*"' sh "$name" "$@"
"""


@dataclass
class Hosts:
    """Two namespaces ``<prefix>-a`` and ``<prefix>-b`` joined by a veth pair (a context manager).

    Attributes
    ----------
    prefix
        Names of the namespaces and hosts; unique per process by default.
    """

    prefix: str = field(default_factory=lambda: f"dssfnlk{os.getpid()}")
    _made: list[str] = field(default_factory=list)
    _tmp: Path | None = None

    @property
    def names(self) -> list[str]:
        """The namespaces (also the hosts' hostnames)."""
        return [f"{self.prefix}-a", f"{self.prefix}-b"]

    @property
    def addresses(self) -> list[str]:
        """The hosts' addresses (host a first)."""
        return [f"{SUBNET}.1", f"{SUBNET}.2"]

    @property
    def devices(self) -> list[str]:
        """The veth ends (host a's first)."""
        return [f"{self.prefix[-9:]}a", f"{self.prefix[-9:]}b"]

    def __enter__(self) -> Hosts:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self) -> None:
        require_root_tools()
        for ns in self.names:
            _run(["ip", "netns", "add", ns])
            self._made.append(ns)
        dev_a, dev_b = self.devices
        _run(["ip", "link", "add", dev_a, "netns", self.names[0], "type", "veth",
              "peer", "name", dev_b, "netns", self.names[1]])
        for ns, dev, addr in zip(self.names, self.devices, self.addresses):
            _run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            _run(["ip", "-n", ns, "link", "set", dev, "up"])
        self._tmp = Path(tempfile.mkdtemp(prefix="dssfn-links-"))
        cases = "".join(f"  {addr}) ns={ns}; name={ns};;\n"
                        for ns, addr in zip(self.names, self.addresses))
        agent = self._tmp / "agent"
        agent.write_text(_AGENT.format(cases=cases))
        agent.chmod(0o755)
        (self._tmp / "hostfile").write_text("".join(f"{a} slots=1\n" for a in self.addresses))

    def close(self) -> None:
        """Kill what still runs in the namespaces (our job's daemons, by pid), then delete
        them (and with them the veth pair and qdiscs) and the agent."""
        for ns in self._made:
            pids = subprocess.run(["ip", "netns", "pids", ns], stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], stdin=subprocess.DEVNULL,
                           capture_output=True)
        self._made.clear()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def cap(self, rate_bits: float | None) -> None:
        """Cap the link at ``rate_bits`` bit/s in both directions (``tbf`` on each end);
        None removes the caps (the veth's own speed)."""
        for ns, dev in zip(self.names, self.devices):
            if rate_bits is None:
                subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev,
                                "root"], stdin=subprocess.DEVNULL, capture_output=True)
            else:
                _run(tbf_command(ns, dev, rate_bits))

    @property
    def agent(self) -> Path:
        """The ssh agent script (PRRTE ``plm_ssh_agent``)."""
        assert self._tmp is not None
        return self._tmp / "agent"

    @property
    def hostfile(self) -> Path:
        """The hostfile: both addresses, one slot each."""
        assert self._tmp is not None
        return self._tmp / "hostfile"

    def mpi_env(self, base: dict[str, str]) -> dict[str, str]:
        """Open MPI settings of a job across the two hosts: one-sided over osc/rdma + btl/tcp,
        daemons and MPI traffic only on the hosts' subnet (an ``OMPI_MCA_*`` in ``base``,
        e.g. ``btl_tcp_progress_thread``, is kept unless set here)."""
        env = dict(base)
        subnet = f"{SUBNET}.0/24"
        env.update(
            PRTE_MCA_plm_ssh_agent=str(self.agent),
            PRTE_MCA_oob_tcp_if_include=subnet,
            OMPI_MCA_btl="self,tcp",
            OMPI_MCA_btl_tcp_if_include=subnet,
            OMPI_MCA_osc="rdma",
        )
        return env

    def mpirun_prefix(self, mpirun: str, ranks: int = 2) -> list[str]:
        """``mpirun`` started inside host a (its own hostname), one rank per host."""
        ns = self.names[0]
        return ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                'hostname "$1"; shift; exec "$@"', "sh", ns,
                mpirun, "--hostfile", str(self.hostfile), "--map-by", "node", "-n", str(ranks)]
