"""Import published training-throughput rows into willitscale's validation data.

    python scripts/import_published_runs.py RUNS_TOML

``RUNS_TOML`` is a research table of published runs (one ``[[run]]`` per row, every row cited,
with ``side`` already assigned by the split rule of docs/validation.md, and ``[shape.NAME]``
tables for shapes the catalog lacks). Rows whose ``id`` is already in
``src/willitscale/validation/published/data/`` are left alone (the data is append-only: a
row's settings and side never change once committed); new rows are appended to the file of
their split group.

Each row becomes willitscale settings (``[run.settings]``) by the rules below, every choice the
source does not state written into the row's ``assumed`` list; a row no setting can express
gets ``not_expressible = "why"`` instead and stays in the data. The wave-1 rows (the former
``willitscale.validation.published`` module's goldens) were converted once, settings unchanged;
their research copies are skipped here.

This script is how the rows got into the data; the package reads only the data files.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "willitscale" / "validation" / "published" / "data"

# ---------------------------------------------------------------------------------------------
# mapping rules: a research row (free-text fields) -> willitscale settings
# ---------------------------------------------------------------------------------------------

#: rows that no setting expresses today, and why (they stay in the data, reported as such)
NOT_EXPRESSIBLE_PATTERNS = (
    (re.compile(r"^other: .*block", re.I),
     "activation checkpointing of every n-th transformer block with n unstated: no recompute "
     "mode says which share of the blocks is recomputed"),
    (re.compile(r"^selective: feed-forward", re.I),
     "only the MLP module of every block is checkpointed: no recompute mode names a module set"),
    (re.compile(r"^selective \(torchtitan per-op SAC", re.I),
     "torchtitan's per-op selective checkpointing (every other matmul's output saved, the rest "
     "recomputed): no recompute mode names that op set"),
)


def not_expressible(row: dict) -> str:
    """Why ``row`` cannot be expressed as settings, or ''."""
    if row["id"] == "opt-175b-992xa100":
        return ("'up to 147 TFLOP/s' is a best case with its FLOP convention unstated; the TP "
                "degree, micro-batch and recomputation are unstated too")
    if row["id"].startswith("tzafon-"):
        return "GPU count and parallel plan unstated"
    if "docmask" in row["id"]:
        return ("intra-document masking with unstated document lengths: the attention work "
                "per token is unknown")
    for pattern, why in NOT_EXPRESSIBLE_PATTERNS:
        if pattern.search(str(row.get("recompute", ""))):
            return why
    if "offload" in str(row.get("sharding", "")).lower():
        return ("optimizer states (and parameters) offloaded to CPU memory: offloading is not "
                "modelled")
    if "offload" in str(row.get("recompute", "")).lower():
        return "checkpointed activations offloaded to host memory: offloading is not modelled"
    if "ulysses" in (str(row.get("attention_kernel", "")) + str(row.get("framework", ""))
                     + row["id"]).lower() and row.get("cp", 1) > 1:
        return ("Ulysses (all-to-all) sequence parallelism: willitscale's context parallelism is "
                "ring attention")
    return ""


def _inter_node(row: dict, assumed: list[str]) -> str | None:
    """The ``inter_node`` setting for a row's free-text network, or None for the GPU default."""
    text = str(row.get("inter_node", "")).lower()
    if "compute:" in text:  # MLPerf system descriptions: storage, compute, management NICs
        text = text.split("compute:", 1)[1]
    gpus = row["nodes"] * row["gpus_per_node"] if row.get("nodes") else 0
    if "3.2 tbps" in text:
        return "8x400Gbps"
    if "8 x 400" in text:
        return "8x400Gbps"
    if "8 x 200" in text:
        return "8x200Gbps"
    nics = re.search(r"(\d+)\s*x\s*[a-z0-9 .-]*?(\d{3})\s*gb", text)
    if nics:
        return f"{nics.group(1)}x{nics.group(2)}Gbps"
    if text.startswith("800 gbps"):
        return "2x400Gbps"
    if text.startswith("400 gbps"):
        return "400Gbps"
    if gpus > row["gpus_per_node"]:
        assumed.append("inter-node network unstated: the GPU's reference servers' NICs "
                       "(willitscale's default for the GPU)")
    return None


def _sharding(row: dict, settings: dict, assumed: list[str]) -> None:
    text = str(row.get("sharding", "")).lower()
    if text.startswith("hybrid-shard"):
        settings["fsdp"] = "hybrid"
        if "num_replicas" in text:
            assumed.append("HSDP shard group = one node of 8 GPUs (the sizes below 32B)")
    elif "full-shard" in text:
        settings["fsdp"] = "full"
    elif text.startswith("zero1"):
        if row["nodes"] * row["gpus_per_node"] > 1:
            settings["zero"] = 1
    elif text.startswith("none"):
        pass
    elif text.startswith("fsdp over dp"):
        settings["zero"] = 1
        assumed.append("Llama 3's FSDP that keeps parameters after the forward: ZeRO-1, as the "
                       "wave-1 Llama 3 rows")
    elif text.startswith("unstated"):
        settings["zero"] = 1
        assumed.append("ZeRO-1 (Megatron-LM's distributed optimizer) assumed for an unstated "
                       "sharding of a Megatron-LM run")
    else:
        raise SystemExit(f"{row['id']}: no rule for sharding {row.get('sharding')!r}")


def _recompute(row: dict, settings: dict, assumed: list[str]) -> None:
    text = str(row.get("recompute", "")).lower()
    if text.startswith("none"):
        settings["recompute"] = "none"
    elif text.startswith("full"):
        settings["recompute"] = "full"
    elif text.startswith("unstated") and "megatron" in str(row.get("framework", "")).lower():
        settings["recompute"] = "selective"
        settings["sequence_parallel"] = True
        assumed.append("recomputation unstated for a Megatron-LM TP run: selective "
                       "recomputation with sequence parallelism assumed (Korthikanti et al. "
                       "2022's recommended setting, Megatron-LM's usual one since)")
    elif text.startswith("unstated"):
        settings["recompute"] = _least_recompute_that_fits(row, settings)
        assumed.append(f"recomputation unstated ('explored' per run): the least recomputation "
                       f"that fits in memory by willitscale's memory model at import time, "
                       f"micro-batch 1: {settings['recompute']}")
    else:
        raise SystemExit(f"{row['id']}: no rule for recompute {row.get('recompute')!r}")


def _least_recompute_that_fits(row: dict, settings: dict) -> str:
    from willitscale.estimation.estimate import out_of_memory_verdict
    from willitscale.scenario.build import build_scenario

    model = _model_for(row)
    for mode in ("none", "selective", "full"):
        sc = build_scenario({**settings, "recompute": mode, "model": model})
        if out_of_memory_verdict(sc) is None:
            return mode
    return "full"


_SHAPES: dict[str, dict] = {}


def _model_for(row: dict):
    if row.get("model"):
        return row["model"]
    from willitscale.workload.transformer import Transformer

    return Transformer(**transformer_fields(row["shape"], _SHAPES[row["shape"]]))


def transformer_fields(name: str, shape: dict) -> dict:
    """A research ``[shape.NAME]`` table as :class:`~willitscale.workload.transformer.Transformer`
    fields (``ffn`` is ``ffn_hidden``; activation and QK-norm are not shape fields)."""
    out = {"name": name, "layers": shape["layers"], "hidden": shape["hidden"],
           "heads": shape["heads"], "kv_heads": shape.get("kv_heads", shape["heads"]),
           "ffn_hidden": shape["ffn"], "gated_mlp": shape["gated_mlp"], "vocab": shape["vocab"],
           "tied_embeddings": shape["tied_embeddings"], "norm": shape["norm"],
           "position": "learned" if shape["position"] == "learned" else "rope",
           "bias": shape["bias"], "max_positions": shape.get("max_positions", 2048)}
    if "head_dim" in shape:
        out["head_dim"] = shape["head_dim"]
    if out["position"] == "rope":
        out["max_positions"] = 131072
    return out


def settings_for(row: dict) -> tuple[dict, list[str]]:
    """``(settings, assumptions added)`` for an expressible research row."""
    assumed: list[str] = []
    gpus_per_node = row["gpus_per_node"]
    settings: dict = {"gpu": row["gpu"], "nodes": row["nodes"], "gpus_per_node": gpus_per_node,
                      "seq_len": row["seq_len"]}
    inter = _inter_node(row, assumed)
    if inter is not None and row["nodes"] > 1:
        settings["inter_node"] = inter
    for key in ("tp", "pp", "cp"):
        if row.get(key, 1) > 1:
            settings[key] = row[key]
    dtype = re.search(r"bf16|fp16|fp8", str(row["dtype"])).group(0)
    if dtype != row["dtype"]:
        assumed.append(f"dtype {dtype} (the source does not state it)")
    settings["dtype"] = dtype
    gpus = row["nodes"] * gpus_per_node
    settings["micro_batch"] = row.get("micro_batch", 1)
    if "micro_batch" not in row:
        assumed.append("micro-batch unstated: 1 assumed")
    dp = gpus // (row.get("tp", 1) * row.get("pp", 1) * row.get("cp", 1))
    settings["global_batch"] = row.get("global_batch", dp * settings["micro_batch"])
    if "global_batch" not in row:
        assumed.append("global batch unstated: one micro-batch per GPU per step assumed")
    schedule = str(row.get("pp_schedule", "1f1b"))
    if row.get("pp", 1) > 1 and schedule.startswith("interleaved"):
        settings["pp_schedule"] = "interleaved"
        virtual = row.get("virtual_stages")
        if not virtual or virtual == 1:
            virtual = 2
            assumed.append("interleaving depth unstated: 2 virtual stages per GPU assumed")
        settings["virtual_stages"] = virtual
    if row.get("sequence_parallel"):
        settings["sequence_parallel"] = True
    elif row.get("tp", 1) > 1 and "torchtitan" in str(row.get("framework", "")):
        settings["sequence_parallel"] = True
        assumed.append("sequence parallelism with TP: torchtitan's tensor-parallel plan shards "
                       "the norms' activations over the sequence (SequenceParallel)")
    _sharding(row, settings, assumed)
    kernel = str(row.get("attention_kernel", "")).lower()
    if kernel.startswith("unfused") or (kernel.startswith("unstated for the baseline")):
        settings["flash_attention"] = False
        if kernel.startswith("unstated"):
            assumed.append("attention kernel unstated for the Megatron-LM baseline: unfused "
                           "(Megatron-LM's default without --use-flash-attn)")
    _recompute(row, settings, assumed)
    return settings, assumed


# ---------------------------------------------------------------------------------------------
# the split rule (docs/validation.md): wave-1 roles, the frozen table, hash parity after it
# ---------------------------------------------------------------------------------------------

def side_by_rule(group: str) -> str:
    from willitscale.validation.published.split import side_by_rule as rule

    return rule(group)


# ---------------------------------------------------------------------------------------------
# TOML output (the few types the data uses)
# ---------------------------------------------------------------------------------------------


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        if not v:
            return "[]"
        return "[\n" + "".join(f"  {_value(x)},\n" for x in v) + "]"
    raise TypeError(type(v))


def _table(header: str, fields: dict) -> str:
    lines = [header]
    for key, v in fields.items():
        if v is None or isinstance(v, dict):
            continue
        lines.append(f"{key} = {_value(v)}")
    return "\n".join(lines) + "\n"


def row_toml(row: dict) -> str:
    head = {k: v for k, v in row.items() if not isinstance(v, dict)}
    out = _table("[[run]]", head)
    for sub in ("settings", "extra", "shape_inline"):
        if row.get(sub):
            out += _table(f"[run.{sub}]", row[sub])
    return out


def shape_toml(name: str, fields: dict, source: str) -> str:
    return _table(f'[shape."{name}"]', {**{k: v for k, v in fields.items() if k != "name"},
                                        "source": source})


# ---------------------------------------------------------------------------------------------
# research row -> data row
# ---------------------------------------------------------------------------------------------

_FACTS = ("framework", "attention_kernel", "fp8_recipe", "compile", "flops_convention",
          "intra_node", "inter_node", "sharding", "recompute", "url", "quote")


def _extra(row: dict) -> dict:
    out = {}
    for key, v in row.items():
        if key.startswith("extra_") and key != "extra_mfu_as_published":
            name = key[len("extra_"):]
            if isinstance(v, str) and re.fullmatch(r"[0-9.]+k", v):
                v = float(v[:-1]) * 1e3
            if isinstance(v, (int, float)):
                out[name] = float(v)
    return out


def data_row(row: dict) -> dict:
    side = side_by_rule(row["split_group"])
    if side != row["side"]:
        raise SystemExit(f"{row['id']}: research side {row['side']} but the rule says {side}")
    out = {"id": row["id"], "side": side, "split_group": row["split_group"],
           "source_id": row["source_id"], "quality": row["quality"], "citation": row["citation"],
           "metric": row["metric"], "published": float(row["published"])}
    if row.get("model"):
        out["model"] = row["model"]
    else:
        out["shape"] = row["shape"]
    for key in _FACTS:
        if key in row:
            out[f"source_{key}" if key in ("intra_node", "inter_node", "sharding", "recompute")
                else key] = row[key]
    out["stated"] = list(row.get("stated", []))
    assumed = list(row.get("assumed", []))
    why = not_expressible(row)
    if why:
        out["not_expressible"] = why
    else:
        settings, more = settings_for(row)
        assumed += more
        if str(row.get("extra_tp_comm_overlap", "")).startswith("userbuffers"):
            settings["tp_comm_overlap"] = True
        out["settings"] = settings
    if "extra_cuda_graphs" in row:
        out["note"] = f"CUDA graphs: {row['extra_cuda_graphs']} (not modelled)"
    out["assumed"] = assumed
    out["extra"] = _extra(row)
    return out


def existing_ids() -> set[str]:
    ids = set()
    for path in DATA.glob("*.toml"):
        ids |= {r["id"] for r in tomllib.loads(path.read_text()).get("run", [])}
    return ids


def group_file(group: str) -> Path:
    return DATA / (re.sub(r"[^a-z0-9]+", "-", group.lower()).strip("-") + ".toml")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs_toml")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    research = tomllib.loads(Path(args.runs_toml).read_text())
    _SHAPES.update(research.get("shape", {}))
    DATA.mkdir(parents=True, exist_ok=True)
    have = existing_ids()
    added: dict[Path, list[str]] = {}
    shapes_needed: dict[Path, set[str]] = {}
    for row in research["run"]:
        if row["id"] in have or row.get("wave1"):
            continue
        if row["split_group"] == "meta/llama3" and row["id"] in ("llama3-405b-8k-8192",
                                                                 "llama3-405b-8k-16384"):
            continue  # wave-1 rows, converted once from the former module
        path = group_file(row["split_group"])
        added.setdefault(path, []).append(row_toml(data_row(row)))
        if row.get("shape"):
            shapes_needed.setdefault(path, set()).add(row["shape"])
    for path, rows in added.items():
        text = path.read_text() if path.exists() else _header(path)
        known = set(tomllib.loads(text).get("shape", {})) if path.exists() else set()
        for name in sorted(shapes_needed.get(path, set()) - known):
            shape = research["shape"][name]
            text += "\n" + shape_toml(name, transformer_fields(name, shape), shape["shape_source"])
        text += "".join("\n" + r for r in rows)
        path.write_text(text)
        print(f"{path.relative_to(ROOT)}: +{len(rows)} rows")
    return 0


def _header(path: Path) -> str:
    return ("# Published training throughputs (validation data of willitscale's compute model).\n"
            "# Written by scripts/import_published_runs.py; the split rule and the row format are\n"
            "# in docs/validation.md. Rows are append-only: settings and side never change.\n")


if __name__ == "__main__":
    raise SystemExit(main())
