"""An emulated cluster on one Linux machine: N "nodes" as network namespaces on a bridge.

::

      node 0 (netns)          node 1 (netns)              bridge (netns)
     ranks 0..R-1            ranks R..2R-1          ┌─────────────────────┐
     wis0 10.213.0.1 ──veth── n0 ─┐                 │                     │
                     tbf      tbf └── br0 ── n1 ──veth── wis0 10.213.0.2  │
                                                          tbf      tbf

Each node's uplink is shaped to ``uplink`` bytes/s in each direction with ``tc tbf`` on both
ends of its veth (the node's end shapes what it sends, the bridge's end what it receives).
Ranks of one node talk over that namespace's loopback, unshaped; ranks of different nodes
cross two shaped veths and the bridge, as inter-node traffic crosses NICs and a switch. The
kernels here have no ``netem``, so no latency is added: what latency there is comes from the
real network stack.

The command runs once per node, inside the node's namespace, with ``MASTER_ADDR`` (node 0),
``MASTER_PORT``, ``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME`` (the node's interface),
``NCCL_HOSTID`` (so NCCL treats the namespaces as different hosts) and the node's place in
``WILLITSCALE_NNODES``/``WILLITSCALE_NODE_RANK``/``WILLITSCALE_NPROC_PER_NODE`` (read by
``willitscale bench``) and ``PET_NNODES``/``PET_NODE_RANK``/... (read by torchrun) set.

Namespaces are named ``wis-<pid>-...``: on start, those of a previous run whose process is
gone (a crash, SIGKILL) are removed first, and the run says so. Teardown (success, failure,
Ctrl-C, SIGTERM) stops every process left in the namespaces and deletes them. The nodes'
commands die with ``emulate`` even when it is killed with SIGKILL (they are sent SIGTERM:
:mod:`willitscale.bench.ranks.lifeline`); only its namespaces then stay, until the next run.

Every node's command is watched (each one polled, none hidden behind a node still running):
when one fails, the run names it and how it ended, asks the others to stop (SIGTERM: a
``willitscale bench`` stops as on Ctrl-C and keeps its finished rows), and the teardown stops
what still runs after :data:`GRACE_S`.

Ctrl-C (or SIGTERM, see ``willitscale emulate``) while the command runs is passed on to every
node's command as SIGINT; what still runs after :data:`GRACE_S` is stopped by the teardown.
From the first interrupt until the teardown is done, further SIGINT/SIGTERM are held back (a
terminal's Ctrl-C reaches the nodes' commands directly as well, and a second one must not cut
the teardown short and leave namespaces or processes behind); one that arrives then is acted
on (KeyboardInterrupt) once the teardown is done.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from willitscale.bench.ranks.lifeline import die_with_parent
from willitscale.bench.ranks.watch import exit_text
from willitscale.errors import BenchmarkError, ConfigError
from willitscale.results.store import pid_alive
from willitscale.units import format_bandwidth

__all__ = ["EmulatedCluster", "check_prerequisites", "cleanup_stale", "PREFIX"]

PREFIX = "wis-"
SUBNET = "10.213.0"
IFNAME = "wis0"
MAX_NODES = 64
GRACE_S = 10.0
TBF_LATENCY = "50ms"
#: tbf's bucket: at least one 64 KiB GSO super-packet plus headroom, or 4 ms at the shaped rate
MIN_BURST_BYTES = 128 * 1024
BURST_SECONDS = 0.004
#: ``ip netns exec NS`` bind-mounts the files of /etc/netns/NS over /etc (iproute2's convention)
NETNS_ETC = Path("/etc/netns")
_NAME_RE = re.compile(rf"^{re.escape(PREFIX)}(\d+)-")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and out.returncode != 0:
        raise BenchmarkError(f"`ip {' '.join(args)}` failed: {out.stderr.strip()}")
    return out


def check_prerequisites() -> None:
    """Root, ``ip`` and ``tc`` -- or a message saying what is missing."""
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        raise BenchmarkError(f"willitscale emulate needs {' and '.join(missing)} from iproute2 "
                             "(apt-get install iproute2)")
    if os.geteuid() != 0:
        raise BenchmarkError("willitscale emulate needs root to create network namespaces and "
                             "shape links: run it as root (e.g. sudo -E willitscale emulate ...)")


def _namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_namespace_processes(ns: str) -> None:
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 0.0)):
        pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split() if p.isdigit()]
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline and any(pid_alive(p) for p in pids):
            time.sleep(0.05)


@contextmanager
def _signals_held() -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM back for the block (main thread only; elsewhere a no-op);
    yields the list of signals that arrived meanwhile."""
    arrived: list[int] = []
    try:
        previous = {sig: signal.signal(sig, lambda signum, frame: arrived.append(signum))
                    for sig in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: signals are not delivered here anyway
        yield arrived
        return
    try:
        yield arrived
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _delete_namespace(ns: str) -> None:
    _kill_namespace_processes(ns)
    _ip("netns", "delete", ns, check=False)
    shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)


def cleanup_stale() -> list[str]:
    """Delete namespaces left by emulations whose process is gone; returns their names."""
    stale = [ns for ns in _namespaces()
             if (m := _NAME_RE.match(ns)) and not pid_alive(int(m[1]))]
    for ns in stale:
        _delete_namespace(ns)
    return stale


@dataclass(frozen=True, slots=True, kw_only=True)
class EmulatedCluster:
    """``nodes`` namespaces of ``ranks_per_node`` ranks each, uplinks shaped to ``uplink``."""

    nodes: int
    ranks_per_node: int
    uplink: float  #: bytes/s, one direction
    uplink_text: str = ""
    tag: str = ""

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise ConfigError("nodes", self.nodes, f"an integer from 1 to {MAX_NODES}")
        if self.ranks_per_node < 1:
            raise ConfigError("ranks_per_node", self.ranks_per_node, "an integer >= 1")
        if self.uplink < 1000:
            raise ConfigError("uplink", self.uplink_text or self.uplink, "a rate of at least 8kbit")
        if not self.tag:
            object.__setattr__(self, "tag", f"{PREFIX}{os.getpid()}")

    # -- names ----------------------------------------------------------------------------

    def node_ns(self, i: int) -> str:
        return f"{self.tag}-n{i}"

    @property
    def bridge_ns(self) -> str:
        return f"{self.tag}-br"

    def address(self, i: int) -> str:
        return f"{SUBNET}.{i + 1}"

    @property
    def burst_bytes(self) -> int:
        return int(max(MIN_BURST_BYTES, self.uplink * BURST_SECONDS))

    # -- build and tear down --------------------------------------------------------------

    def _shape(self, ns: str, dev: str) -> None:
        rate_bits = int(round(self.uplink * 8))
        out = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev,
                              "root", "tbf", "rate", f"{rate_bits}bit", "burst",
                              str(self.burst_bytes), "latency", TBF_LATENCY],
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise BenchmarkError(f"cannot shape {dev} with tc tbf ({out.stderr.strip()}); "
                                 "does this kernel have sch_tbf?")

    def _write_hosts(self, ns: str) -> None:
        """Name every node in the namespace's /etc/hosts (gloo and c10d look peers up)."""
        etc = NETNS_ETC / ns
        etc.mkdir(parents=True, exist_ok=True)
        # the IPv4-mapped IPv6 forms too: c10d's store looks up the peers of its dual-stack socket
        names = [("127.0.0.1", "localhost")] + [(self.address(i), f"{self.tag}-node{i}")
                                                for i in range(self.nodes)]
        lines = [f"{prefix}{addr} {name}" for addr, name in names for prefix in ("", "::ffff:")]
        (etc / "hosts").write_text("\n".join(lines) + "\n")

    def up(self) -> None:
        stale = cleanup_stale()
        if stale:
            owners = sorted({int(m[1]) for ns in stale if (m := _NAME_RE.match(ns))})
            print(f"note: removed {len(stale)} network namespace(s) left by emulate run(s) that "
                  f"were killed (pid {', '.join(map(str, owners))}): {', '.join(stale)}",
                  file=sys.stderr)
        _ip("netns", "add", self.bridge_ns)
        _ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge", "forward_delay", "0")
        _ip("-n", self.bridge_ns, "link", "set", "br0", "up")
        for i in range(self.nodes):
            ns, port = self.node_ns(i), f"n{i}"
            _ip("netns", "add", ns)
            self._write_hosts(ns)
            _ip("-n", self.bridge_ns, "link", "add", port, "type", "veth", "peer", "name", IFNAME,
                "netns", ns)
            _ip("-n", self.bridge_ns, "link", "set", port, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", IFNAME)
            _ip("-n", ns, "link", "set", IFNAME, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            self._shape(ns, IFNAME)
            self._shape(self.bridge_ns, port)

    def down(self) -> None:
        """Stop every process in the namespaces and delete them; not interruptible (a signal
        arriving meanwhile raises KeyboardInterrupt afterwards)."""
        with _signals_held() as arrived:
            existing = _namespaces()
            for ns in [*(self.node_ns(i) for i in range(self.nodes)), self.bridge_ns]:
                if ns in existing:
                    _delete_namespace(ns)
        if arrived and sys.exc_info()[0] is None:
            raise KeyboardInterrupt

    def __enter__(self) -> EmulatedCluster:
        check_prerequisites()
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # -- run ------------------------------------------------------------------------------

    def describe(self) -> dict:
        return {"nodes": self.nodes, "ranks_per_node": self.ranks_per_node,
                "uplink": self.uplink_text or format_bandwidth(self.uplink, bits=True),
                "uplink_Bps": self.uplink, "burst_bytes": self.burst_bytes,
                "shaper": f"tc tbf on both ends of each node's veth, latency {TBF_LATENCY}"}

    def node_env(self, i: int, port: int) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "MASTER_ADDR": self.address(0), "MASTER_PORT": str(port),
            "GLOO_SOCKET_IFNAME": IFNAME, "NCCL_SOCKET_IFNAME": IFNAME,
            "NCCL_HOSTID": f"{self.tag}-node{i}", "NCCL_IB_DISABLE": "1",
            "WILLITSCALE_NNODES": str(self.nodes), "WILLITSCALE_NODE_RANK": str(i),
            "WILLITSCALE_NPROC_PER_NODE": str(self.ranks_per_node), "NODE_RANK": str(i),
            "PET_NNODES": str(self.nodes), "PET_NODE_RANK": str(i),
            "PET_NPROC_PER_NODE": str(self.ranks_per_node), "PET_MASTER_ADDR": self.address(0),
            "PET_MASTER_PORT": str(port),
            "WILLITSCALE_EMULATED": json.dumps({**self.describe(), "node": i}),
        })
        return env

    def run(self, command: Sequence[str]) -> int:
        """Run ``command`` in every node; returns the first failing exit status (or 0)."""
        argv = [_resolve(command[0]), *command[1:]]
        # fresh namespaces: nothing listens yet; stay below the ephemeral range (32768-60999)
        port = random.randint(20000, 32000)
        # no thread runs here, so preexec_fn is safe: each command dies with this process
        procs = [subprocess.Popen(["ip", "netns", "exec", self.node_ns(i), *argv],
                                  env=self.node_env(i, port), preexec_fn=die_with_parent())  # noqa: PLW1509
                 for i in range(self.nodes)]
        try:
            code, failure = _wait_all(procs)
            if failure:
                print(f"error: {failure}", file=sys.stderr)
            return code
        except KeyboardInterrupt:
            with _signals_held():  # held until the teardown is done (see the module doc)
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGINT)
                _wait_until(procs, GRACE_S)
                self.down()
            raise


def _resolve(program: str) -> str:
    """``program`` on PATH, or next to this Python (a venv's ``willitscale`` when the venv is
    not activated)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), os.path.dirname(sys.executable)])
    found = shutil.which(program, path=path)
    if found is None:
        raise ConfigError("command", program, "a program on PATH")
    return found


def _running(procs: list[subprocess.Popen]) -> list[subprocess.Popen]:
    """The commands still running; every one is polled (no short-circuit)."""
    return [p for p in procs if p.poll() is None]


def _wait_until(procs: list[subprocess.Popen], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while _running(procs) and time.monotonic() < deadline:
        time.sleep(0.05)


def _wait_all(procs: list[subprocess.Popen]) -> tuple[int, str]:
    """Wait for every node's command; when one fails, ask the others to stop (they would wait
    for it in a collective), give them :data:`GRACE_S`, and leave the rest to the teardown.
    Returns the exit status (the failed command's, else 0) and what failed."""
    while _running(procs):
        failed = [(i, p.returncode) for i, p in enumerate(procs) if p.returncode not in (None, 0)]
        if failed:
            node, code = min(failed, key=lambda f: (f[1] >= 0, f[0]))
            for p in _running(procs):
                p.send_signal(signal.SIGTERM)
            _wait_until(procs, GRACE_S)
            return (1 if code < 0 else code), (f"node {node}'s command {exit_text(code)}; the "
                                               "other nodes' commands were stopped")
        time.sleep(0.05)
    codes = [p.returncode for p in procs]
    failed = [(i, c) for i, c in enumerate(codes) if c != 0]
    if not failed:
        return 0, ""
    node, code = failed[0]
    return (1 if code < 0 else code), f"node {node}'s command {exit_text(code)}"
