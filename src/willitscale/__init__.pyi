"""Type stub of the lazy public API (``__init__.py`` loads these names on first use).

It names the same modules as ``willitscale._EXPORTS`` (``tests/unit/test_typing.py`` fails when
the two differ), so a type checker sees each public name's real type, and no ``__getattr__``: a
misspelt name is an error to it, as it is at run time.
"""

__version__: str

from willitscale.collectives import (
    Algorithm as Algorithm,
)
from willitscale.collectives import (
    Choice as Choice,
)
from willitscale.collectives import (
    CollectiveCost as CollectiveCost,
)
from willitscale.collectives import (
    Hierarchy as Hierarchy,
)
from willitscale.collectives import (
    LinkCost as LinkCost,
)
from willitscale.collectives import (
    NotApplicable as NotApplicable,
)
from willitscale.collectives import (
    Op as Op,
)
from willitscale.collectives import (
    busbw_factor as busbw_factor,
)
from willitscale.collectives import (
    collective_cost as collective_cost,
)
from willitscale.collectives import (
    collective_costs as collective_costs,
)
from willitscale.collectives import (
    fastest as fastest,
)
from willitscale.collectives import (
    nccl_tests_size as nccl_tests_size,
)
from willitscale.compute.efficiency import (
    Efficiency as Efficiency,
)
from willitscale.errors import (
    BenchmarkError as BenchmarkError,
)
from willitscale.errors import (
    ConfigError as ConfigError,
)
from willitscale.errors import (
    Infeasible as Infeasible,
)
from willitscale.errors import (
    MissingDependency as MissingDependency,
)
from willitscale.errors import (
    UnknownNameError as UnknownNameError,
)
from willitscale.errors import (
    WillItScaleError as WillItScaleError,
)
from willitscale.estimation.estimate import (
    estimate as estimate,
)
from willitscale.estimation.model_summary import (
    ModelSummary as ModelSummary,
)
from willitscale.estimation.model_summary import (
    summarize_model as summarize_model,
)
from willitscale.estimation.result import (
    StepEstimate as StepEstimate,
)
from willitscale.estimation.timeline import (
    Span as Span,
)
from willitscale.estimation.timeline import (
    Timeline as Timeline,
)
from willitscale.fabric import (
    CollectiveCall as CollectiveCall,
)
from willitscale.fabric import (
    ParallelLayout as ParallelLayout,
)
from willitscale.fabric import (
    StepComm as StepComm,
)
from willitscale.fabric import (
    Traffic as Traffic,
)
from willitscale.fabric import (
    calls_time as calls_time,
)
from willitscale.fabric import (
    simulate as simulate,
)
from willitscale.fabric import (
    simulate_collective as simulate_collective,
)
from willitscale.fabric import (
    step_traffic as step_traffic,
)
from willitscale.hardware import (
    Catalog as Catalog,
)
from willitscale.hardware import (
    Cluster as Cluster,
)
from willitscale.hardware import (
    Gpu as Gpu,
)
from willitscale.hardware import (
    Link as Link,
)
from willitscale.hardware import (
    LinkKind as LinkKind,
)
from willitscale.hardware import (
    Node as Node,
)
from willitscale.hardware import (
    Switch as Switch,
)
from willitscale.hardware import (
    build_cluster as build_cluster,
)
from willitscale.hardware import (
    get_gpu as get_gpu,
)
from willitscale.hardware import (
    get_link as get_link,
)
from willitscale.hardware import (
    get_node as get_node,
)
from willitscale.hardware import (
    list_gpus as list_gpus,
)
from willitscale.hardware import (
    list_links as list_links,
)
from willitscale.hardware import (
    list_nodes as list_nodes,
)
from willitscale.hardware import (
    load_catalog as load_catalog,
)
from willitscale.hardware.calibration import (
    Calibration as Calibration,
)
from willitscale.hardware.calibration import (
    ComputeCalibration as ComputeCalibration,
)
from willitscale.hardware.calibration import (
    LinkCalibration as LinkCalibration,
)
from willitscale.hardware.calibration import (
    load_calibration as load_calibration,
)
from willitscale.memory.activations import (
    ActivationMemory as ActivationMemory,
)
from willitscale.memory.activations import (
    activation_memory as activation_memory,
)
from willitscale.memory.state import (
    StateConvention as StateConvention,
)
from willitscale.memory.state import (
    StateMemory as StateMemory,
)
from willitscale.memory.state import (
    get_convention as get_convention,
)
from willitscale.memory.state import (
    state_bytes_per_gpu as state_bytes_per_gpu,
)
from willitscale.memory.state import (
    state_memory as state_memory,
)
from willitscale.plan.explain import (
    explain_plan as explain_plan,
)
from willitscale.plan.frames import (
    to_frame as to_frame,
)
from willitscale.plan.requirements import (
    least_link_bandwidth as least_link_bandwidth,
)
from willitscale.plan.requirements import (
    link_requirement as link_requirement,
)
from willitscale.plan.requirements import (
    required_node_bandwidth as required_node_bandwidth,
)
from willitscale.plan.scaling import (
    scaling_rows as scaling_rows,
)
from willitscale.plan.search import (
    SearchResult as SearchResult,
)
from willitscale.plan.search import (
    SearchSpace as SearchSpace,
)
from willitscale.plan.search import (
    search_plans as search_plans,
)
from willitscale.plan.sizing import (
    gpus_for_deadline as gpus_for_deadline,
)
from willitscale.plan.sizing import (
    gpus_to_hold_state as gpus_to_hold_state,
)
from willitscale.report.contents import (
    ReportContents as ReportContents,
)
from willitscale.report.contents import (
    build_contents as build_contents,
)
from willitscale.report.html import (
    render_html as render_html,
)
from willitscale.report.plots.base import (
    Chart as Chart,
)
from willitscale.report.plots.base import (
    write_charts as write_charts,
)
from willitscale.report.timeline import (
    render_timeline as render_timeline,
)
from willitscale.report.trace import (
    chrome_trace as chrome_trace,
)
from willitscale.results.store import (
    ResultsStore as ResultsStore,
)
from willitscale.scenario.batch import (
    PlanBatch as PlanBatch,
)
from willitscale.scenario.build import (
    build_scenario as build_scenario,
)
from willitscale.scenario.options import (
    ParallelOptions as ParallelOptions,
)
from willitscale.scenario.plan import (
    Plan as Plan,
)
from willitscale.scenario.scenario import (
    DataLoading as DataLoading,
)
from willitscale.scenario.scenario import (
    DdpOptions as DdpOptions,
)
from willitscale.scenario.scenario import (
    Measured as Measured,
)
from willitscale.scenario.scenario import (
    Scenario as Scenario,
)
from willitscale.scenario.validate import (
    OutOfMemory as OutOfMemory,
)
from willitscale.step.buckets import (
    comm_schedule as comm_schedule,
)
from willitscale.step.engine import (
    BatchResult as BatchResult,
)
from willitscale.step.evaluate import (
    evaluate_plans as evaluate_plans,
)
from willitscale.step.pipeline import (
    bubble_fraction as bubble_fraction,
)
from willitscale.topology import (
    FabricLinks as FabricLinks,
)
from willitscale.topology import (
    Routing as Routing,
)
from willitscale.topology import (
    Topology as Topology,
)
from willitscale.topology import (
    build_topology as build_topology,
)
from willitscale.topology import (
    max_cluster as max_cluster,
)
from willitscale.topology import (
    parse_routing as parse_routing,
)
from willitscale.topology.placement import (
    GroupPlacement as GroupPlacement,
)
from willitscale.topology.placement import (
    group_placement as group_placement,
)
from willitscale.units import (
    format_bandwidth as format_bandwidth,
)
from willitscale.units import (
    format_count as format_count,
)
from willitscale.units import (
    format_flop_rate as format_flop_rate,
)
from willitscale.units import (
    format_flops as format_flops,
)
from willitscale.units import (
    format_size as format_size,
)
from willitscale.units import (
    format_time as format_time,
)
from willitscale.units import (
    parse_bandwidth as parse_bandwidth,
)
from willitscale.units import (
    parse_count as parse_count,
)
from willitscale.units import (
    parse_flop_rate as parse_flop_rate,
)
from willitscale.units import (
    parse_ports as parse_ports,
)
from willitscale.units import (
    parse_size as parse_size,
)
from willitscale.units import (
    parse_time as parse_time,
)
from willitscale.validation.linkrace import (
    LinkRace as LinkRace,
)
from willitscale.validation.linkrace import (
    lecture_case as lecture_case,
)
from willitscale.validation.published import (
    PublishedRun as PublishedRun,
)
from willitscale.workload import (
    LayerFlops as LayerFlops,
)
from willitscale.workload import (
    ParamCount as ParamCount,
)
from willitscale.workload import (
    TrainingFlops as TrainingFlops,
)
from willitscale.workload import (
    Transformer as Transformer,
)
from willitscale.workload import (
    embedding_params_per_tp_rank as embedding_params_per_tp_rank,
)
from willitscale.workload import (
    get_model as get_model,
)
from willitscale.workload import (
    handbook_tflop_per_gpu as handbook_tflop_per_gpu,
)
from willitscale.workload import (
    head_params_per_tp_rank as head_params_per_tp_rank,
)
from willitscale.workload import (
    kaplan_6pd as kaplan_6pd,
)
from willitscale.workload import (
    korthikanti_model_flops as korthikanti_model_flops,
)
from willitscale.workload import (
    layer_forward_flops as layer_forward_flops,
)
from willitscale.workload import (
    layer_params_per_tp_rank as layer_params_per_tp_rank,
)
from willitscale.workload import (
    list_models as list_models,
)
from willitscale.workload import (
    load_hf_config as load_hf_config,
)
from willitscale.workload import (
    narayanan_flops as narayanan_flops,
)
from willitscale.workload import (
    palm_flops_per_token as palm_flops_per_token,
)
from willitscale.workload import (
    param_count as param_count,
)
from willitscale.workload import (
    recompute_8pd as recompute_8pd,
)
from willitscale.workload import (
    tp_divides_shape as tp_divides_shape,
)
from willitscale.workload import (
    training_flops as training_flops,
)

__all__: list[str]

def __dir__() -> list[str]: ...
