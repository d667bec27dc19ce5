"""``willitscale emulate --nodes N --ranks-per-node R --uplink RATE -- COMMAND``.

How do the benchmarks behave across nodes, without a cluster? Builds N network namespaces joined by a bridge, each node's uplink shaped to RATE (one
direction, e.g. 200Mbit = 25 MB/s) with tc tbf, runs COMMAND once per node inside it (``willitscale
bench ...`` starts R ranks there), and tears everything down afterwards. Needs root and iproute2.
"""

from __future__ import annotations

import argparse
import signal
import sys

__all__ = ["register"]


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser("emulate", help="an emulated cluster of network namespaces with "
                              "shaped links (root)", description=__doc__.split("\n\n", 1)[1].replace("``", ""),
                              epilog=examples(
                                  "sudo willitscale emulate --nodes 2 --ranks-per-node 1 "
                                  "--uplink 200Mbit -- willitscale bench collectives "
                                  "--ops all_reduce -b 4MB -e 32MB",
                                  "sudo willitscale emulate --nodes 2 --ranks-per-node 2 "
                                  "--uplink 1Gbit -- willitscale bench train --model gpt2-tiny"))
    p.add_argument("--nodes", type=int, default=2, help="emulated nodes (default 2)")
    p.add_argument("--ranks-per-node", type=int, default=1, help="ranks on each node (default 1)")
    p.add_argument("--uplink", default="1Gbit",
                   help="each node's link rate, one direction (200Mbit, 1Gbps, 50MB/s)")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="after --: the command to run on every node")
    p.set_defaults(run=run)


def _sigterm_to_interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from willitscale.bench.emulate import EmulatedCluster
    from willitscale.errors import ConfigError
    from willitscale.units import parse_bandwidth

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ConfigError("command", "", "a command after --, e.g. -- willitscale bench collectives")
    cluster = EmulatedCluster(nodes=args.nodes, ranks_per_node=args.ranks_per_node,
                              uplink=parse_bandwidth(args.uplink, field="uplink"),
                              uplink_text=args.uplink)
    previous = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    try:
        with cluster:
            print(f"emulated cluster: {cluster.nodes} nodes x {cluster.ranks_per_node} ranks, "
                  f"uplink {args.uplink} each way (tbf burst {cluster.burst_bytes} B)",
                  file=sys.stderr)
            return cluster.run(command)
    finally:
        signal.signal(signal.SIGTERM, previous)
