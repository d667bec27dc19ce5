"""``willitscale collective --backend nccl`` and ``--backend gloo``: the library's choice and cost."""

from __future__ import annotations

#: shown next to busbw when the picked algorithm reduces in the network (NVLS, SHARP)
BUSBW_NOTE = ("busbw as nccl-tests reports it (algbw x 2(n-1)/n for all_reduce): with NVLS, "
              "NVLSTree or CollNet the switch reduces the data, so busbw is not the bandwidth on "
              "any wire; algbw is what each GPU's links carry")
_IN_NETWORK = ("NVLS", "NVLSTree", "CollNetDirect", "CollNetChain")


def _system(args, ranks: int):
    from willitscale.collectives.nccl_node import nccl_system
    from willitscale.errors import ConfigError
    from willitscale.hardware import get_node

    if args.node is None:
        raise ConfigError("--backend nccl needs --node PRESET (NCCL's model reads the node's GPUs, "
                          "NVLink, NICs and CPU; `willitscale hardware list --kind node`)")
    node = get_node(args.node)
    per_node = min(ranks, node.gpus_per_node)
    if ranks % per_node:
        raise ConfigError("--ranks", ranks, f"at most {node.gpus_per_node} or a multiple of it "
                          f"(whole {node.name} nodes)")
    from willitscale.collectives.nccl.env import parse_nccl_env

    env = parse_nccl_env(getattr(args, "nccl_env", None))
    system, notes = nccl_system(node, ranks=ranks, ranks_per_node=per_node, collnet=args.sharp, env=env)
    notes = list(notes)
    if env.text:
        notes.append(f"NCCL environment: {env.describe()} (applied where NCCL applies it: "
                     "docs/collectives.md, 'NCCL environment settings')")
    return node, system, notes


def _gpus_per_process(args, system) -> int:
    from willitscale.units import parse_count

    if args.gpus_per_process is None:
        return 1
    return int(parse_count(args.gpus_per_process, field="--gpus-per-process"))


def _pair_json(choice, j: int, k: int, factor: float) -> dict:
    pair, size = choice.pairs[j], float(choice.size[k])
    t = float(choice.achieved[j, k])
    bandwidth, channels = pair.bandwidth, pair.channels
    if pair.ladder is not None:  # point-to-point: NCCL's channels for this size
        bandwidth, channels = float(pair.ladder.bandwidth(size)), int(pair.ladder.channels(size))
    return {"algorithm": pair.algorithm.value, "protocol": pair.protocol.label,
            "time_s": t, "nccl_model_time_s": float(choice.predicted[j, k]),
            "algbw_GBps": size / t / 1e9, "busbw_GBps": size / t * factor / 1e9,
            "nccl_latency_us": float(pair.latency_at(size)[0]) * 1e6, "nccl_algbw_GBps": bandwidth / 1e9,
            "channels": channels}


def nccl_result(choice, k: int, node, notes) -> dict:
    """The JSON of one size: the pick, then every candidate by NCCL's predicted time."""
    from willitscale.collectives.metrics import busbw_factor
    from willitscale.collectives.nccl.tables import NCCL_VERSION

    system, op = choice.system, choice.op
    factor = float(busbw_factor(op, system.ranks))
    order = choice.ranking(k)
    pick = _pair_json(choice, order[0], k, factor)
    graphs = choice.graphs
    out = {"op": op.value, "size_bytes": float(choice.size[k]), "ranks": system.ranks, "backend": "nccl",
           "node": node.name, "nodes": system.nodes, "ranks_per_node": system.ranks_per_node,
           **pick, "runners_up": [_pair_json(choice, j, k, factor) for j in order[1:]],
           "forced": choice.forced, "nccl_env": dict(system.env.text),
           "runtime_channels": choice.graphs.runtime_channels,
           "graphs": {"ring": graphs.ring.describe(), "tree": graphs.tree.describe(),
                      "nvls": graphs.nvls.describe() if graphs.nvls else None},
           "model": f"pick by {NCCL_VERSION}'s tuning model; time = that pair's achieved time "
                    "(docs/collectives.md)", "assumptions": notes}
    if pick["algorithm"] in _IN_NETWORK:
        out["busbw_note"] = BUSBW_NOTE
    return out


def run_nccl(args, op, sizes, ranks: int) -> int:
    from willitscale.collectives.nccl.run import nccl_choice
    from willitscale.errors import ConfigError

    node, system, notes = _system(args, ranks)
    if ranks < 2:
        raise ConfigError("--ranks", ranks, "at least 2 (one rank moves nothing)")
    choice = nccl_choice(op, sizes, system, algorithm=args.algorithm, protocol=args.protocol,
                         gpus_per_process=_gpus_per_process(args, system))
    if getattr(args, "calibration", None):
        from willitscale.collectives.nccl_calibrated import with_measured_pairs
        from willitscale.hardware.calibration import load_calibration

        choice, measured = with_measured_pairs(choice, load_calibration(args.calibration).section("collective"))
        notes += measured or [f"{args.calibration} has no [[collective]] entry for NCCL {op.value} on "
                              f"{system.nodes} x {system.ranks_per_node} ranks: the model's times"]
    if args.gpus_per_process is not None:
        notes.append(f"{args.gpus_per_process} GPU(s) per process (nccl-tests -g): each extra GPU "
                     "a process launches adds the fitted launch overhead")
    results = [nccl_result(choice, k, node, notes) for k in range(len(sizes))]
    if args.json:
        from willitscale.cli.output import print_json

        print_json(results[0] if len(results) == 1 else {"results": results})
    elif len(results) == 1:
        _print_one(results[0], choice)
    else:
        _print_sweep(results)
    return 0


def _print_one(r: dict, choice) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from willitscale.cli.output import console
    from willitscale.units import format_size

    table = Table(title=f"{r['op']} of {format_size(r['size_bytes'])} over {r['ranks']} ranks "
                        f"({r['nodes']} x {r['ranks_per_node']} on {r['node']}), NCCL",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for header in ("candidate", "NCCL model\nus", "achieved\nus", "algbw\nGB/s", "busbw\nGB/s"):
        table.add_column(header, justify="left" if header == "candidate" else "right", no_wrap=True)
    for i, p in enumerate([r] + r["runners_up"]):
        name = f"{p['algorithm']}/{p['protocol']}" + (" *" if i == 0 else "")
        table.add_row(name, f"{p['nccl_model_time_s'] * 1e6:.1f}", f"{p['time_s'] * 1e6:.1f}",
                      f"{p['algbw_GBps']:.1f}", f"{p['busbw_GBps']:.1f}")
    out = console()
    out.print(table)
    nxt = r["runners_up"][0] if r["runners_up"] else None
    why = "NCCL_ALGO/NCCL_PROTO given" if r["forced"] else "the least time in NCCL's own model"
    text = f"* NCCL picks {r['algorithm']}/{r['protocol']}: {why}"
    if nxt:
        text += (f"; next {nxt['algorithm']}/{nxt['protocol']} "
                 f"(+{nxt['nccl_model_time_s'] / r['nccl_model_time_s'] - 1:.0%} in NCCL's model)")
    out.print(text + f". Achieved {r['time_s'] * 1e6:.1f} us, busbw {r['busbw_GBps']:.1f} GB/s.")
    out.print(f"graphs: ring {r['graphs']['ring']}; tree {r['graphs']['tree']}"
              + (f"; NVLS {r['graphs']['nvls']}" if r["graphs"]["nvls"] else ""))
    if "busbw_note" in r:
        out.print(f"note: {r['busbw_note']}")
    out.print(f"model: {r['model']}")
    for note in r["assumptions"]:
        out.print(f"assumption: {escape(note)}")


def _print_sweep(results) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from willitscale.cli.output import console
    from willitscale.units import format_size

    r0 = results[0]
    table = Table(title=f"{r0['op']} over {r0['ranks']} ranks ({r0['nodes']} x {r0['ranks_per_node']} "
                        f"on {r0['node']}), NCCL", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, show_edge=False)
    for header in ("size", "NCCL picks", "time us", "busbw GB/s", "runner-up (NCCL model)"):
        table.add_column(header, justify="right" if header != "NCCL picks" else "left", no_wrap=True)
    for r in results:
        nxt = r["runners_up"][0] if r["runners_up"] else None
        up = (f"{nxt['algorithm']}/{nxt['protocol']} +{nxt['nccl_model_time_s'] / r['nccl_model_time_s'] - 1:.0%}"
              if nxt else "-")
        table.add_row(format_size(r["size_bytes"]), f"{r['algorithm']}/{r['protocol']}",
                      f"{r['time_s'] * 1e6:.1f}", f"{r['busbw_GBps']:.1f}", up)
    out = console()
    out.print(table)
    if any("busbw_note" in r for r in results):
        out.print(f"note: {BUSBW_NOTE}")
    out.print(f"model: {r0['model']}")
    for note in r0["assumptions"]:
        out.print(f"assumption: {escape(note)}")


def _geometry(args, ranks: int) -> tuple[int, int] | None:
    """(nodes, ranks per node) the flags give: ``--node`` (whole nodes, as NCCL's model takes
    them) or ``--ranks-per-node``; None for one flat level (inside a node or across nodes?)."""
    if args.node is not None:
        from willitscale.hardware import get_node

        per_node = min(ranks, get_node(args.node).gpus_per_node)
        return (ranks // per_node, per_node) if ranks % per_node == 0 else None
    if args.ranks_per_node is not None:
        from willitscale.units import parse_count

        g = int(parse_count(args.ranks_per_node, field="--ranks-per-node"))
        return (ranks // g, g) if g > 0 and ranks % g == 0 else None
    return None


def _gloo_entry(args, op, ranks: int, notes: list):
    """The calibration's Gloo ``[[collective]]`` entry for ``op`` on the flags' geometry (None
    without --calibration, or with a note when it has none)."""
    if not getattr(args, "calibration", None):
        return None
    from willitscale.collectives.measured_lines import curves_for
    from willitscale.errors import ConfigError
    from willitscale.hardware.calibration import load_calibration

    geometry = _geometry(args, ranks)
    if geometry is None:
        raise ConfigError("--calibration with --backend gloo needs --node PRESET or --ranks-per-node "
                          "(an entry is matched on its nodes x ranks per node; one flat level does "
                          "not say whether the ranks share a node)")
    found = curves_for(load_calibration(args.calibration).section("collective"), op.value, "gloo", *geometry)
    if not found:
        notes.append(f"{args.calibration} has no Gloo [[collective]] entry for {op.value} on "
                     f"{geometry[0]} x {geometry[1]} ranks: the model's times")
        return None
    entry = found[0]
    notes.append(f"Gloo {entry.pair}: measured time from the calibration's [[collective]] entry (runs "
                 f"{', '.join(map(str, entry.runs)) or '?'}, {entry.points} points), the whole "
                 "collective as measured (host staging included when the sweep staged)")
    return entry


def run_gloo(args, op, sizes, ranks: int, network, notes) -> int:
    """Gloo's algorithm for ``op`` at each size, on the network from the flags."""
    from willitscale.collectives.gloo import gloo_cost
    from willitscale.collectives.metrics import busbw_factor
    from willitscale.units import format_size

    staging, device = 0.0, args.device or ("cuda" if args.node is not None else "cpu")
    entry = _gloo_entry(args, op, ranks, notes)
    if device == "cuda" and entry is None:
        from willitscale.collectives.gloo import staging_bandwidth
        from willitscale.hardware import get_node

        gen = get_node(args.node).gpu.pcie_gen if args.node is not None else None
        staging = staging_bandwidth(gen or 4)
        notes.append(f"CUDA tensors: staged through pinned host memory over PCIe Gen{gen or 4} x16 "
                     f"at 0.8 of its rate, before and after the collective")
    if entry is None:
        notes.append("Gloo over TCP: the link figures are the catalog's or the flags'; a calibration "
                     "of `bench collectives --backend gloo` gives the real alpha and bandwidth")
    factor = float(busbw_factor(op, ranks))
    results = []
    for size in sizes:
        c = gloo_cost(op, size, ranks, network, staging_bandwidth=staging)
        r = {"op": op.value, "size_bytes": size, "ranks": ranks, "backend": "gloo",
             "algorithm": c.algorithm, "time_s": c.time, "latency_time_s": c.latency_time,
             "bandwidth_time_s": c.bandwidth_time, "staging_time_s": c.staging_time,
             "formula": c.formula, "device": device, "network": network.to_json(), "assumptions": notes}
        if entry is not None:  # the measured line times Gloo's one algorithm outright
            r.update(time_s=float(entry.time(size)), latency_time_s=entry.latency,
                     bandwidth_time_s=size / entry.bandwidth, staging_time_s=0.0, measured=True,
                     formula=f"measured: {entry.latency * 1e6:.4g} us + S / {entry.bandwidth / 1e9:.4g} GB/s")
        t = r["time_s"]
        r.update(algbw_GBps=size / t / 1e9 if t else 0.0, busbw_GBps=size / t * factor / 1e9 if t else 0.0)
        results.append(r)
    if args.json:
        from willitscale.cli.output import print_json

        print_json(results[0] if len(results) == 1 else {"results": results})
        return 0
    from rich.markup import escape

    from willitscale.cli.output import console

    out = console()
    for r in results:
        out.print(f"{r['op']} of {format_size(r['size_bytes'])} over {ranks} ranks, Gloo {r['algorithm']}: "
                  f"{r['time_s'] * 1e3:.3g} ms, busbw {r['busbw_GBps']:.3g} GB/s ({r['formula']})")
    out.print(f"network: {network.describe()}")
    for note in notes:
        out.print(f"assumption: {escape(note)}")
    return 0
