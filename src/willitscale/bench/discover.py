"""What a node is, from the facts :func:`~willitscale.bench.environment.host_facts` reads
(``nvidia-smi``, ``nvidia-smi topo -m``, ``/sys``, ``/proc``): a node preset the catalog loads,
and what looks wrong (pure: facts and the catalog in, a :class:`Discovery` out).

* **GPUs**: ``nvidia-smi``'s names and memory, matched to the catalog's GPUs by model token and
  memory; where two catalog GPUs fit (H100 SXM and H100 PCIe both report "H100 80GB"), the
  GPU-to-GPU links of the topology matrix decide.
* **intra-node link**: the matrix's ``NV#`` codes: the same ``NV#`` between every pair, equal to
  one catalog NVLink's links per GPU, is that link through NVSwitch; otherwise the links per GPU
  summed over its peers (a full mesh); no ``NV`` code at all is PCIe.
* **NICs**: active InfiniBand ports (``/sys/class/infiniband/*/ports/*/rate``, e.g.
  ``400 Gb/sec (4X NDR)``) matched to the catalog's InfiniBand link of that rate; without
  InfiniBand, Ethernet interfaces with a device and a known speed, matched to a RoCE link.
* **warnings**: a GPU with no NIC on its NUMA node, GPUs sharing a PCIe switch (``PIX``/``PXB``
  between them), GPUs that reach each other only across NUMA nodes (``SYS``), InfiniBand NICs
  without GPUDirect RDMA (no ``nvidia_peermem`` module).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Discovery", "discover_node", "preset_toml", "compared_with", "closest_node", "IB_RATE"]

#: ``/sys/class/infiniband/*/ports/*/rate``: "400 Gb/sec (4X NDR)" -> 400
IB_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")
_NV = re.compile(r"^NV(\d+)$")
#: a GPU model in a name: letters then three or more digits ("h100", "a100", "mi300x", "b200"),
#: not a memory size ("80gb") or a memory type ("hbm3")
_MODEL = re.compile(r"^[a-z]+\d{3,}[a-z]*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Discovery:
    """A node as discovered: its CPU side always, its GPU side when there are GPUs."""

    host: str
    cpu: str | None
    cpus: int | None
    numa: tuple[dict, ...]  #: {"node": n, "cpus": "0-23"} per NUMA node
    gpus: int = 0
    gpu_names: tuple[str, ...] = ()
    gpu: str | None = None  #: catalog GPU name
    intra_link: str | None = None  #: catalog link name
    intra_topology: str | None = None
    nic: str | None = None  #: catalog link name of one NIC port
    nics: int = 0
    nic_rate_Gbps: float | None = None
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  #: how each choice was made
    facts: dict = field(default_factory=dict, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "cpu": self.cpu, "cpus": self.cpus, "numa": list(self.numa),
                "gpus": self.gpus, "gpu_names": list(self.gpu_names), "gpu": self.gpu,
                "intra_link": self.intra_link, "intra_topology": self.intra_topology,
                "nic": self.nic, "nics": self.nics, "nic_rate_Gbps": self.nic_rate_Gbps,
                "warnings": list(self.warnings), "notes": list(self.notes)}


def _model_tokens(name: str) -> set[str]:
    """Tokens with a letter and a digit ("h100", "a100", "80gb"): what tells GPUs apart."""
    tokens = set(re.split(r"[^a-z0-9]+", name.lower()))
    return {t for t in tokens if re.search(r"[a-z]", t) and re.search(r"\d", t)}


def _nv_links(topo: dict | None) -> tuple[str, int | None, list[str]]:
    """``(topology, NVLinks per GPU or None, notes)`` from the matrix's GPU-to-GPU codes."""
    if not topo:
        return "unknown", None, ["no nvidia-smi topo -m matrix"]
    gpus = [d for d in topo["devices"] if d.startswith("GPU")]
    codes = {(a, b): topo["links"][a][b] for a in gpus for b in gpus if a != b}
    counts = [int(m[1]) for c in codes.values() if (m := _NV.match(c))]
    if not counts:
        return "pcie", None, ["no NV# code between GPUs: they talk over PCIe"]
    if len(counts) == len(codes) and len(set(counts)) == 1:
        return "nvswitch", counts[0], [f"every GPU pair shows NV{counts[0]}: NVSwitch, "
                                       f"{counts[0]} links per GPU"]
    per_gpu = max(sum(int(m[1]) for b in gpus if b != a and (m := _NV.match(codes[a, b])))
                  for a in gpus)
    return "full-mesh", per_gpu, [f"NV# codes differ between pairs: a mesh of up to {per_gpu} "
                                  "links per GPU"]


def _gpu_and_link(names: list[str], memory: int | None, topology: str, links: int | None,
                  catalog) -> tuple[str | None, str | None, str]:
    """``(catalog GPU, catalog intra-node link, how)``: the GPUs whose model tokens and memory
    fit, narrowed by the wiring the matrix shows (NVLink of that many links per GPU, or PCIe)."""
    wanted = {t for t in _model_tokens(names[0]) if _MODEL.match(t)}
    fits = [g for g in catalog.gpus.values() if wanted and wanted <= _model_tokens(g.display_name)
            and (memory is None or abs(g.memory - memory) <= 0.1 * g.memory)]
    if topology == "pcie":
        wired = [g for g in fits if g.intra_topology == "pcie"]
    else:
        nvlinks = {link.name for link in catalog.links.values()
                   if link.kind.value == "nvlink" and link.links == links}
        wired = [g for g in fits if g.intra_node_link in nvlinks]
    fits = wired or fits
    if len(fits) != 1:
        return None, None, (f"{names[0]!r} matches {len(fits)} catalog GPUs"
                            f"{': ' + ', '.join(g.name for g in fits) if fits else ''}")
    gpu = fits[0]
    link = gpu.intra_node_link if wired else None
    return gpu.name, link, f"{names[0]!r} ({topology}) is the catalog's {gpu.name}"


def _link_without_names(topology: str, links: int | None, hint, catalog) -> tuple[str | None, str]:
    """``(catalog intra-node link, how)`` when nvidia-smi names no GPU: the given GPU's link if
    the matrix's wiring agrees with it, else the one catalog NVLink of that many links."""
    if hint is not None:
        link = catalog.links.get(hint.intra_node_link)
        if topology == "pcie" and hint.intra_topology == "pcie":
            return hint.intra_node_link, f"{hint.name} (given) on PCIe, as the matrix shows"
        if link is not None and link.links == links:
            return link.name, f"{hint.name} (given): its {link.name} has {links} links per GPU, " \
                              "as the matrix shows"
        return None, (f"{hint.name} (given) has {link.links if link else '?'} NVLinks per GPU, "
                      f"the matrix shows {links}: no intra-node link chosen")
    found = sorted(link.name for link in catalog.links.values()
                   if link.kind.value == "nvlink" and links and link.links == links)
    if len(found) == 1:
        return found[0], f"no GPU name: {links} links per GPU is {found[0]}"
    return None, (f"no GPU name, and {links} links per GPU fits {len(found)} catalog NVLinks"
                  + (f" ({', '.join(found)})" if found else ""))


def _nics(facts: dict, catalog) -> tuple[str | None, int, float | None, list[str]]:
    ports = [p for p in facts.get("infiniband") or () if "ACTIVE" in str(p.get("state") or "")
             and str(p.get("link_layer") or "InfiniBand") != "Ethernet"]  # Ethernet: RoCE ports
    rates = [float(m[1]) for p in ports if (m := IB_RATE.match(str(p.get("rate") or "")))]
    kind = "infiniband"
    if not rates:
        eth = [i for i in facts.get("interfaces") or () if i.get("speed_Mbps") and i.get("device")]
        rates, kind = [i["speed_Mbps"] / 1000 for i in eth], "ethernet"
    if not rates:
        return None, 0, None, ["no active InfiniBand port and no Ethernet NIC with a known speed"]
    rate = max(rates)
    count = sum(r == rate for r in rates)
    match = [link.name for link in catalog.links.values() if link.kind.value == kind
             and abs(link.bandwidth * 8 / 1e9 - rate) < 1e-6 * rate
             and (kind == "infiniband" or link.name.startswith("roce"))]
    note = f"{count} {kind} port(s) at {rate:g} Gb/s" + (f" -> {match[0]}" if match else
                                                        ": no catalog link of that rate")
    return (match[0] if match else None), count, rate, [note]


def _warnings(facts: dict, topo: dict | None) -> list[str]:
    out = []
    if topo:
        gpus = [d for d in topo["devices"] if d.startswith("GPU")]
        nics = [d for d in topo["devices"] if d.startswith("NIC")]
        for g in gpus:
            if nics and all(topo["links"][g].get(n) == "SYS" for n in nics):
                out.append(f"{g} reaches every NIC across NUMA nodes (SYS): its traffic crosses "
                           "the CPU interconnect; bind it to a NIC on its own socket")
        shared = sorted({f"{a}-{b}" for a in gpus for b in gpus
                         if a < b and topo["links"][a][b] in ("PIX", "PXB")})
        if shared:
            out.append(f"GPUs behind one PCIe switch: {', '.join(shared[:6])}"
                       f"{' ...' if len(shared) > 6 else ''}: their traffic to the host and the "
                       "NICs shares the switch's uplink")
        far = sorted({f"{a}-{b}" for a in gpus for b in gpus if a < b and topo["links"][a][b] == "SYS"})
        if far:
            out.append(f"GPU pairs across NUMA nodes without NVLink: {', '.join(far[:6])}"
                       f"{' ...' if len(far) > 6 else ''}")
    if facts.get("gpus") and facts.get("infiniband") and facts.get("peermem") is False:
        out.append("InfiniBand NICs but no nvidia_peermem module: no GPUDirect RDMA, GPU data "
                   "is staged through host memory")
    return out


def discover_node(facts: dict, catalog) -> Discovery:
    """The node ``facts`` (``host_facts()`` plus ``peermem``) describe."""
    topo = facts.get("topology")
    gpus = facts.get("gpus") or []
    names = [g["name"] for g in gpus]
    count, counted = _gpu_count(len(gpus), topo)
    topology, links, notes = _nv_links(topo) if count else ("unknown", None, [])
    memory = gpus[0].get("memory_bytes") if gpus else None
    hint = facts.get("gpu_hint")  # a catalog Gpu the user named (the captures name none)
    if names:
        gpu, intra, said = _gpu_and_link(names, memory, topology, links, catalog)
    elif count:
        intra, said = _link_without_names(topology, links, hint, catalog)
        gpu = hint.name if hint is not None else None
        said += "" if hint is not None else "; the GPU model is unknown (give --gpu)"
    else:
        gpu, intra, said = None, None, ""
    nic, nics, rate, nic_notes = _nics(facts, catalog)
    return Discovery(host=str(facts.get("hostname") or ""), cpu=facts.get("cpu"), cpus=facts.get("cpus"),
                     numa=tuple(facts.get("numa") or ()), gpus=count, gpu_names=tuple(names),
                     gpu=gpu, intra_link=intra, intra_topology=topology if count else None,
                     nic=nic, nics=nics, nic_rate_Gbps=rate,
                     warnings=tuple(_warnings(facts, topo)),
                     notes=tuple(counted + ([said] if count else ["no NVIDIA GPU found (no "
                                                                 "nvidia-smi, or it lists none)"])
                                 + notes + nic_notes),
                     facts=facts)


def _gpu_count(listed: int, topo: dict | None) -> tuple[int, list[str]]:
    """GPUs of the node: nvidia-smi's list, or the matrix's GPU rows where it has more (a
    capture of nvidia-smi inside a job that saw part of the node), with a note saying so."""
    rows = len([d for d in topo["devices"] if d.startswith("GPU")]) if topo else 0
    if rows > listed:
        return rows, [f"{rows} GPUs in the topology matrix, {listed} listed by nvidia-smi: "
                      f"counted {rows}"]
    return listed, []


def preset_toml(d: Discovery, name: str, *, when: str) -> str:
    """A ``[node.NAME]`` table the catalog loads (``--catalog``/``WILLITSCALE_CATALOG``)."""
    missing = [k for k in ("gpu", "intra_link", "nic") if getattr(d, k) is None]
    if not d.gpus or missing:
        from willitscale.errors import ConfigError

        raise ConfigError(f"no node preset: {'no GPU found' if not d.gpus else 'unknown ' + ', '.join(missing)}"
                          f" ({'; '.join(d.notes)})")
    model = d.gpu_names[0] if d.gpu_names else d.gpu
    lines = [f"[node.{name}]", f'display_name = "{d.gpus} x {model} on {d.host}"',
             f'gpu = "{d.gpu}"', f"gpus_per_node = {d.gpus}", f'intra_link = "{d.intra_link}"',
             f'intra_topology = "{d.intra_topology}"', f'nic = "{d.nic}"', f"nics = {d.nics}",
             f'source = "willitscale discover on {d.host} at {when}: ' + "; ".join(d.notes).replace('"', "'") + '"']
    return "\n".join(lines) + "\n"


#: the fields of a node preset that discovery determines, compared with a built-in node
COMPARED = ("gpu", "gpus_per_node", "intra_link", "intra_topology", "nic", "nics")


def compared_with(d: Discovery, node) -> tuple[list[str], list[tuple[str, object, object]]]:
    """``(fields equal, [(field, discovered, built-in) that differ])`` against catalog ``node``;
    the built-in fields discovery cannot see (NVSwitch chips, display name, source) differ by
    construction and are listed with both values too."""
    mine = {"gpu": d.gpu, "gpus_per_node": d.gpus, "intra_link": d.intra_link,
            "intra_topology": d.intra_topology, "nic": d.nic, "nics": d.nics}
    theirs = {"gpu": node.gpu.name, "gpus_per_node": node.gpus_per_node,
              "intra_link": node.intra_link.name, "intra_topology": node.intra_topology,
              "nic": node.nic.name, "nics": node.nics}
    same = [k for k in COMPARED if mine[k] == theirs[k]]
    differ = [(k, mine[k], theirs[k]) for k in COMPARED if mine[k] != theirs[k]]
    unseen = {"nvswitch": node.nvswitch.name if node.nvswitch else None,
              "nvswitches": node.nvswitches, "display_name": node.display_name}
    differ += [(k, None, v) for k, v in unseen.items() if v]
    return same, differ


def closest_node(d: Discovery, catalog):
    """The built-in node with the same GPU and GPU count, the most compared fields equal."""
    fits = [n for n in catalog.nodes.values() if n.gpu.name == d.gpu and n.gpus_per_node == d.gpus]
    return max(fits, key=lambda n: len(compared_with(d, n)[0]), default=None)
