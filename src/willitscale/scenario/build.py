"""Settings (from flags and scenario files) into a validated :class:`Scenario`.

Catalog names are resolved here (models, GPUs, links, node presets); every default filled in is
recorded in ``Scenario.defaults_applied`` so the report can say what was assumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from willitscale.compute.efficiency import Efficiency
from willitscale.compute.options import ComputeOptions
from willitscale.errors import ConfigError
from willitscale.fabric.backend import FlowNetwork
from willitscale.hardware import build_cluster
from willitscale.hardware.calibration import load_calibration
from willitscale.memory.buffers import DEEPSPEED_BUCKET_ELEMENTS, DeepSpeedOptions
from willitscale.memory.device import CUDA_CONTEXT_BYTES
from willitscale.memory.stage import DEFAULT_MEMORY_FRACTION
from willitscale.scenario.megatron import JOB_FILE_SHAPE
from willitscale.scenario.options import ParallelOptions
from willitscale.scenario.plan import Plan, positive_int, resolve_batch
from willitscale.scenario.scenario import DataLoading, DdpOptions, Measured, Scenario
from willitscale.workload import get_model

__all__ = ["build_scenario", "build_plan", "build_options", "unstated_knobs"]

_DDP_KEYS = {"overlap": "overlap", "bucket_cap": "bucket_cap", "first_bucket": "first_bucket",
             "grad_reduce_dtype": "grad_reduce_dtype", "overlap_slowdown": "overlap_slowdown",
             "gradient_as_bucket_view": "gradient_as_bucket_view"}


def _model(settings: Mapping[str, Any]):
    if settings.get("model") is not None and settings.get("params") is not None:
        raise ConfigError("give either --model (a shape) or --params (a count), not both")
    if settings.get("model") is not None:
        model = get_model(settings["model"])
        check_job_file_shape(settings, model)
        return model, None
    if settings.get("params") is not None:
        return None, float(settings["params"])
    stated = settings.get(JOB_FILE_SHAPE)
    if stated is not None:
        file, shape = stated
        raise ConfigError(f"{file}: model shape", _fields(shape),
                          "the shape of a catalog model (`willitscale model list`): none has it; "
                          "give --model with a Hugging Face config.json of this model")
    raise ConfigError("no model: give --model NAME (or a HF config.json) or --params COUNT")


def check_job_file_shape(settings: Mapping[str, Any], model) -> None:
    """A job file's stated model shape (Megatron-LM, NeMo) must be ``model``'s: a ConfigError
    naming the fields that differ, never another model estimated in its place."""
    stated = settings.get(JOB_FILE_SHAPE)
    if stated is None:
        return
    file, shape = stated
    differ = {k: v for k, v in shape.items() if getattr(model, k, v) != v}
    if differ:
        theirs = {k: getattr(model, k) for k in differ}
        raise ConfigError(f"{file}: model shape", _fields(differ),
                          f"{model.name}'s ({_fields(theirs)}), the --model given: the file and "
                          "--model describe different models; drop --model or give the file's")


def _fields(shape: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in shape.items())


def _cluster(settings: Mapping[str, Any]):
    if settings.get("preset") is None and settings.get("gpu") is None and settings.get("calibration"):
        measured = sorted({c.device for c in _calibration(settings).compute}) or ["links only"]
        raise ConfigError("gpu", None, "the catalog GPU the calibration's figures are for (it "
                          f"measured: {', '.join(measured)}), e.g. --gpu h100-sxm, or a --preset "
                          "node; `willitscale hardware list` shows them")
    return build_cluster(
        preset=settings.get("preset"), gpu=settings.get("gpu"), nodes=settings.get("nodes", 1),
        gpus_per_node=settings.get("gpus_per_node"), intra_node=settings.get("intra_node"),
        inter_node=settings.get("inter_node"))


def _default_stage(settings: Mapping[str, Any]) -> int:
    """The ZeRO stage a framework runs when none is given: FSDP's default FULL_SHARD (3); the
    others shard nothing by default (Megatron-LM without --use-distributed-optimizer, DeepSpeed
    stage 0, DDP)."""
    return 3 if settings.get("framework") == "fsdp" else 0


def _sharding(settings: Mapping[str, Any]) -> tuple[int, str]:
    """``(zero, shard_scope)`` from ``zero``, ``shard_scope`` and ``fsdp`` (full = ZeRO-3 over the
    data-parallel group, hybrid = ZeRO-3 within each node, replicated across nodes)."""
    zero, scope = settings.get("zero", _default_stage(settings)), settings.get("shard_scope", "dp")
    fsdp = settings.get("fsdp")
    if fsdp is None:
        return zero, scope
    if fsdp not in ("full", "hybrid"):
        raise ConfigError("fsdp", fsdp, "full (FULL_SHARD) or hybrid (HYBRID_SHARD)")
    if settings.get("zero") not in (None, 3):
        raise ConfigError(f"--fsdp {fsdp} is ZeRO-3; it contradicts --zero {settings['zero']}")
    return 3, "node" if fsdp == "hybrid" else "dp"


def build_plan(settings: Mapping[str, Any], gpus: int) -> Plan:
    """The plan for ``gpus`` GPUs: ``dp`` fills what the model-parallel degrees leave."""
    degrees = {k: settings.get(k, 1) for k in ("tp", "pp", "cp", "ep")}
    for name, value in degrees.items():  # before any arithmetic on them
        positive_int(name, value)
    model_parallel = degrees["tp"] * degrees["pp"] * degrees["cp"]
    dp = settings.get("dp")
    if dp is None:
        if gpus % model_parallel:
            raise ConfigError(f"tp*pp*cp = {model_parallel} does not divide the cluster's {gpus} GPUs")
        dp = gpus // model_parallel
    micro, accum = resolve_batch(dp=dp, micro_batch=settings.get("micro_batch"),
                                 global_batch=settings.get("global_batch"),
                                 grad_accum=settings.get("grad_accum"))
    schedule = settings.get("pp_schedule", "1f1b")
    virtual = settings.get("virtual_stages", 2 if schedule == "interleaved" else 1)
    zero, scope = _sharding(settings)
    return Plan(dp=dp, **degrees, zero=zero, shard_scope=scope, micro_batch=micro,
                grad_accum=accum, recompute=settings.get("recompute", "none"),
                pp_schedule=schedule, virtual_stages=virtual,
                sequence_parallel=settings.get("sequence_parallel", False),
                framework=settings.get("framework", ""))


def unstated_knobs(settings: Mapping[str, Any]) -> tuple[str, ...]:
    """The plan knobs the settings leave to the estimate's fit (estimation.fit): sharding (no
    ``zero``, ``fsdp`` or ``shard_scope``), sequence parallelism, recomputation. None with a
    measured single-GPU step: it measured the run as it ran (its recomputation included)."""
    if settings.get("step_time_one_gpu") is not None:
        return ()
    out = []
    if not any(settings.get(k) is not None for k in ("zero", "fsdp", "shard_scope")):
        out.append("zero")
    for knob in ("sequence_parallel", "recompute"):
        if settings.get(knob) is None:
            out.append(knob)
    return tuple(out)


def _deepspeed(settings: Mapping[str, Any]) -> DeepSpeedOptions:
    bucket = settings.get("reduce_bucket_size")
    return DeepSpeedOptions(
        reduce_bucket_elements=DEEPSPEED_BUCKET_ELEMENTS if bucket is None else float(bucket),
        overlap_comm=settings.get("overlap_comm"))


def build_options(settings: Mapping[str, Any]) -> ParallelOptions:
    """Placement and execution options from settings (defaults: Megatron-LM's order, no TP
    overlap, FlashAttention)."""
    return ParallelOptions(
        rank_order=settings.get("rank_order"),
        tp_comm_overlap=settings.get("tp_comm_overlap", False),
        flash_attention=settings.get("flash_attention", True),
        allow_tp_across_nodes=settings.get("allow_tp_across_nodes", True),
        collectives=settings.get("collectives", "nccl"))


def build_compute_options(settings: Mapping[str, Any]) -> ComputeOptions:
    """Kernel choices from settings (defaults: the GPU's attention kernel, fused element-wise
    kernels, Transformer Engine's delayed FP8 scaling, one document per sample)."""
    return ComputeOptions(attention_kernel=settings.get("attention_kernel", "auto"),
                          fusion=settings.get("fusion", "fused"),
                          fp8_recipe=settings.get("fp8_recipe", "delayed"),
                          document_length=settings.get("document_length"))


def _efficiency(settings: Mapping[str, Any]) -> Efficiency | None:
    if settings.get("hfu") is not None and settings.get("mfu") is not None:
        raise ConfigError("give either --hfu or --mfu, not both: they count different FLOPs")
    if settings.get("step_time_one_gpu") is not None:
        given = [k for k in ("hfu", "mfu") if settings.get(k) is not None]
        if given:
            raise ConfigError(f"give --{given[0]} ({settings[given[0]]}) or --compute-time-per-step "
                              f"({settings['step_time_one_gpu']:g} s), not both: the measured step "
                              "time sets the compute time the efficiency would")
    for kind in ("hfu", "mfu"):
        if settings.get(kind) is not None:
            return Efficiency(kind=kind, value=float(settings[kind]), source="given")
    return None


def _data(settings: Mapping[str, Any]) -> DataLoading | None:
    given = [k for k in ("sample_bytes", "storage_bandwidth") if settings.get(k) is not None]
    if not given:
        return None
    if len(given) == 1:
        raise ConfigError("data loading needs both --sample-bytes and --storage-bandwidth")
    return DataLoading(sample_bytes=settings["sample_bytes"],
                       storage_bandwidth=settings["storage_bandwidth"],
                       overlapped=settings.get("data_overlapped", True))


def _calibration(settings: Mapping[str, Any]):
    path = settings.get("calibration")
    if path is None:
        return None

    return load_calibration(path)


def build_scenario(settings: Mapping[str, Any]) -> Scenario:
    """A validated :class:`Scenario` from a settings mapping (see :mod:`willitscale.scenario.settings`)."""
    model, params = _model(settings)
    cluster = _cluster(settings)
    defaults: list[str] = list(getattr(cluster, "assumptions", ()))
    seq_len = settings.get("seq_len")
    if seq_len is None:
        if model is None:
            raise ConfigError("--params needs --seq-len (tokens per sample)")
        seq_len = model.seq_len
        if model.source.startswith("Hugging Face config"):
            defaults.append(f"seq_len {seq_len}: from {model.name}'s config.json (the pretraining "
                            "length it implies: rope_scaling's original_max_position_embeddings, "
                            "else max_position_embeddings); give --seq-len for your training run")
        else:
            defaults.append(f"seq_len {seq_len}: {model.name}'s training sequence length")
    if settings.get("micro_batch") is None and settings.get("global_batch") is None:
        defaults.append("micro-batch 1 per GPU (give --micro-batch or --global-batch)")
    ddp = DdpOptions(**{v: settings[k] for k, v in _DDP_KEYS.items() if settings.get(k) is not None})
    measured = Measured(step_time_one_gpu=settings.get("step_time_one_gpu"),
                        allreduce_time=settings.get("allreduce_time"),
                        allreduce_size=settings.get("allreduce_size"))
    return Scenario(
        name=settings.get("name", ""), model=model, params=params, cluster=cluster,
        plan=build_plan(settings, cluster.gpus), seq_len=int(seq_len),
        dtype=settings.get("dtype", "bf16"), efficiency=_efficiency(settings),
        memory_convention=settings.get("memory_convention", ""), ddp=ddp, data=_data(settings),
        measured=measured, calibration=_calibration(settings), network=_network(settings),
        options=build_options(settings), compute=build_compute_options(settings),
        defaults_applied=tuple(defaults),
        memory_fraction=settings.get("memory_fraction", DEFAULT_MEMORY_FRACTION),
        optimizer=settings.get("optimizer", "adamw-fused"),
        cuda_context=settings.get("cuda_context", CUDA_CONTEXT_BYTES),
        deepspeed=_deepspeed(settings),
        distribute_saved_activations=settings.get("distribute_saved_activations", False),
        unstated=unstated_knobs(settings))


def _network(settings: Mapping[str, Any]):
    """A FlowNetwork for ``network = "flow"``; None for the analytic model (the default)."""
    kind = settings.get("network", "analytic")
    fabric_keys = [k for k in ("topology", "oversubscription", "routing", "routing_seed") if k in settings]
    if kind == "analytic":
        if fabric_keys:
            raise ConfigError(f"--{fabric_keys[0].replace('_', '-')} needs --network flow")
        return None
    if kind != "flow":
        raise ConfigError("network", kind, "analytic or flow")

    return FlowNetwork(topology=settings.get("topology", "rail-optimized"),
                       oversubscription=float(settings.get("oversubscription", 1.0)),
                       routing=settings.get("routing", "ecmp"), seed=int(settings.get("routing_seed", 0)))
