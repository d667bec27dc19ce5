"""willitscale: will this training job scale on this GPU cluster's network?

The public Python API. Names load lazily, so ``import willitscale`` (and the CLI) start fast
and numpy is imported only when a model function is first used.

>>> import willitscale as wis
>>> wis.parse_bandwidth("200Gbps")
25000000000.0
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # units
    "parse_size": "willitscale.units",
    "parse_bandwidth": "willitscale.units",
    "parse_time": "willitscale.units",
    "parse_flop_rate": "willitscale.units",
    "parse_count": "willitscale.units",
    "parse_ports": "willitscale.units",
    "format_size": "willitscale.units",
    "format_bandwidth": "willitscale.units",
    "format_time": "willitscale.units",
    "format_flops": "willitscale.units",
    "format_flop_rate": "willitscale.units",
    "format_count": "willitscale.units",
    # errors
    "WillItScaleError": "willitscale.errors",
    "ConfigError": "willitscale.errors",
    "UnknownNameError": "willitscale.errors",
    "Infeasible": "willitscale.errors",
    "BenchmarkError": "willitscale.errors",
    "MissingDependency": "willitscale.errors",
    # hardware
    "Gpu": "willitscale.hardware",
    "Link": "willitscale.hardware",
    "LinkKind": "willitscale.hardware",
    "Switch": "willitscale.hardware",
    "Node": "willitscale.hardware",
    "Cluster": "willitscale.hardware",
    "Catalog": "willitscale.hardware",
    "load_catalog": "willitscale.hardware",
    "get_gpu": "willitscale.hardware",
    "get_link": "willitscale.hardware",
    "get_node": "willitscale.hardware",
    "list_gpus": "willitscale.hardware",
    "list_links": "willitscale.hardware",
    "list_nodes": "willitscale.hardware",
    "build_cluster": "willitscale.hardware",
    # workload
    "Transformer": "willitscale.workload",
    "ParamCount": "willitscale.workload",
    "param_count": "willitscale.workload",
    "layer_params_per_tp_rank": "willitscale.workload",
    "embedding_params_per_tp_rank": "willitscale.workload",
    "head_params_per_tp_rank": "willitscale.workload",
    "tp_divides_shape": "willitscale.workload",
    "TrainingFlops": "willitscale.workload",
    "LayerFlops": "willitscale.workload",
    "training_flops": "willitscale.workload",
    "layer_forward_flops": "willitscale.workload",
    "kaplan_6pd": "willitscale.workload",
    "recompute_8pd": "willitscale.workload",
    "narayanan_flops": "willitscale.workload",
    "korthikanti_model_flops": "willitscale.workload",
    "palm_flops_per_token": "willitscale.workload",
    "handbook_tflop_per_gpu": "willitscale.workload",
    "StateConvention": "willitscale.memory.state",
    "StateMemory": "willitscale.memory.state",
    "get_convention": "willitscale.memory.state",
    "state_bytes_per_gpu": "willitscale.memory.state",
    "state_memory": "willitscale.memory.state",
    "ActivationMemory": "willitscale.memory.activations",
    "activation_memory": "willitscale.memory.activations",
    "get_model": "willitscale.workload",
    "list_models": "willitscale.workload",
    "load_hf_config": "willitscale.workload",
    "ModelSummary": "willitscale.estimation.model_summary",
    "summarize_model": "willitscale.estimation.model_summary",
    # collectives
    "Op": "willitscale.collectives",
    "busbw_factor": "willitscale.collectives",
    "nccl_tests_size": "willitscale.collectives",
    "Algorithm": "willitscale.collectives",
    "LinkCost": "willitscale.collectives",
    "Hierarchy": "willitscale.collectives",
    "CollectiveCost": "willitscale.collectives",
    "collective_cost": "willitscale.collectives",
    "collective_costs": "willitscale.collectives",
    "fastest": "willitscale.collectives",
    "Choice": "willitscale.collectives",
    "NotApplicable": "willitscale.collectives",
    # measurements: calibration (read by the estimate), the results store
    "Calibration": "willitscale.hardware.calibration",
    "LinkCalibration": "willitscale.hardware.calibration",
    "ComputeCalibration": "willitscale.hardware.calibration",
    "load_calibration": "willitscale.hardware.calibration",
    "ResultsStore": "willitscale.results.store",
    # plan: the data-parallel estimate, scaling, requirements, sizing
    "Plan": "willitscale.scenario.plan",
    "Scenario": "willitscale.scenario.scenario",
    "DdpOptions": "willitscale.scenario.scenario",
    "DataLoading": "willitscale.scenario.scenario",
    "Measured": "willitscale.scenario.scenario",
    "Efficiency": "willitscale.compute.efficiency",
    "build_scenario": "willitscale.scenario.build",
    "estimate": "willitscale.estimation.estimate",
    "StepEstimate": "willitscale.estimation.result",
    "scaling_rows": "willitscale.plan.scaling",
    "least_link_bandwidth": "willitscale.plan.requirements",
    "link_requirement": "willitscale.plan.requirements",
    "required_node_bandwidth": "willitscale.plan.requirements",
    "gpus_for_deadline": "willitscale.plan.sizing",
    "gpus_to_hold_state": "willitscale.plan.sizing",
    "comm_schedule": "willitscale.step.buckets",
    # plan: model parallelism, placement and the planner
    "ParallelOptions": "willitscale.scenario.options",
    "PlanBatch": "willitscale.scenario.batch",
    "BatchResult": "willitscale.step.engine",
    "evaluate_plans": "willitscale.step.evaluate",
    "OutOfMemory": "willitscale.scenario.validate",
    "GroupPlacement": "willitscale.topology.placement",
    "group_placement": "willitscale.topology.placement",
    "bubble_fraction": "willitscale.step.pipeline",
    "SearchSpace": "willitscale.plan.search",
    "SearchResult": "willitscale.plan.search",
    "search_plans": "willitscale.plan.search",
    "explain_plan": "willitscale.plan.explain",
    "to_frame": "willitscale.plan.frames",
    "LinkRace": "willitscale.validation.linkrace",
    "lecture_case": "willitscale.validation.linkrace",
    "PublishedRun": "willitscale.validation.published",
    # report: timelines
    "Span": "willitscale.estimation.timeline",
    "Timeline": "willitscale.estimation.timeline",
    "render_timeline": "willitscale.report.timeline",
    "chrome_trace": "willitscale.report.trace",
    # report: figures and the HTML report
    "Chart": "willitscale.report.plots.base",
    "write_charts": "willitscale.report.plots.base",
    "ReportContents": "willitscale.report.contents",
    "build_contents": "willitscale.report.contents",
    "render_html": "willitscale.report.html",
    # fabric: topologies and the flow simulator
    "Topology": "willitscale.topology",
    "FabricLinks": "willitscale.topology",
    "build_topology": "willitscale.topology",
    "max_cluster": "willitscale.topology",
    "Routing": "willitscale.topology",
    "parse_routing": "willitscale.topology",
    "Traffic": "willitscale.fabric",
    "simulate": "willitscale.fabric",
    "simulate_collective": "willitscale.fabric",
    "CollectiveCall": "willitscale.fabric",
    "calls_time": "willitscale.fabric",
    "ParallelLayout": "willitscale.fabric",
    "StepComm": "willitscale.fabric",
    "step_traffic": "willitscale.fabric",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'willitscale' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
