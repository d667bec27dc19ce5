"""The rendezvous store node 0's launcher hosts, listening only where it must.

torch's ``TCPStore`` server binds every interface (``*:port``) when it makes its own socket:
for a job on one machine that is a port anyone on the network can reach, and its protocol has
no authentication. On one node the launcher binds a socket to the loopback address itself and
hands it over (``TCPStore(master_listen_fd=...)``, torch >= 2.4: "a socket already bound to
``port``"; the store owns and closes it), and the ranks' Gloo transport is kept on the loopback
interface as well (``GLOO_SOCKET_IFNAME``, unless set). A job spanning nodes must be reachable
from them: there the store binds as torch does, as torchrun's does.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from datetime import timedelta

from willitscale.bench.ranks.dist import import_torch
from willitscale.errors import BenchmarkError

__all__ = ["host_store", "loopback_only", "LOOPBACK_IFNAME"]

#: the loopback interface's name (Linux ``lo``, BSDs and macOS ``lo0``)
LOOPBACK_IFNAME = "lo" if sys.platform.startswith("linux") else "lo0"


def loopback_only(nnodes: int, master_addr: str) -> bool:
    """Whether the job stays on this machine: one node and a loopback rendezvous address."""
    if nnodes != 1:
        return False
    if master_addr == "localhost":
        return True
    try:
        return ipaddress.ip_address(master_addr).is_loopback
    except ValueError:
        return False


def _bound_socket(port: int) -> tuple[int, int]:
    """A TCP socket bound to 127.0.0.1:``port`` (0: one the kernel picks): ``(fd, port)``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        port = sock.getsockname()[1]
    except OSError:
        sock.close()
        raise
    return sock.detach(), port


def host_store(master_addr: str, port: int, *, nnodes: int, timeout_s: float):
    """Node 0's store; returns ``(store, port)``."""
    torch = import_torch()
    local = loopback_only(nnodes, master_addr)
    timeout = timedelta(seconds=timeout_s)
    fd = None
    try:
        if local:
            fd, port = _bound_socket(port)
            store = torch.distributed.TCPStore("127.0.0.1", port, is_master=True,
                                               wait_for_workers=False, timeout=timeout,
                                               master_listen_fd=fd)
        else:
            store = torch.distributed.TCPStore(master_addr, port, is_master=True,
                                               wait_for_workers=False, timeout=timeout)
    except (RuntimeError, OSError) as exc:
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
        where = "127.0.0.1" if local else master_addr
        raise BenchmarkError(f"cannot listen on {where}:{port} for the rendezvous: {exc}") from None
    return store, store.port
