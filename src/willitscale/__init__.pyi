"""Type stub of the lazy public API (``__init__.py`` loads these names on first use).

It names the same modules as ``willitscale._EXPORTS`` (``tests/unit/test_typing.py`` fails when
the two differ), so a type checker sees each public name's real type, and no ``__getattr__``: a
misspelt name is an error to it, as it is at run time.
"""

__version__: str

from willitscale.collectives import (
    Algorithm as Algorithm,
    Choice as Choice,
    CollectiveCost as CollectiveCost,
    Hierarchy as Hierarchy,
    LinkCost as LinkCost,
    NotApplicable as NotApplicable,
    Op as Op,
    busbw_factor as busbw_factor,
    collective_cost as collective_cost,
    collective_costs as collective_costs,
    fastest as fastest,
    nccl_tests_size as nccl_tests_size,
)
from willitscale.compute.efficiency import (
    Efficiency as Efficiency,
)
from willitscale.errors import (
    BenchmarkError as BenchmarkError,
    ConfigError as ConfigError,
    Infeasible as Infeasible,
    MissingDependency as MissingDependency,
    UnknownNameError as UnknownNameError,
    WillItScaleError as WillItScaleError,
)
from willitscale.estimation.estimate import (
    estimate as estimate,
)
from willitscale.estimation.model_summary import (
    ModelSummary as ModelSummary,
    summarize_model as summarize_model,
)
from willitscale.estimation.result import (
    StepEstimate as StepEstimate,
)
from willitscale.estimation.timeline import (
    Span as Span,
    Timeline as Timeline,
)
from willitscale.fabric import (
    CollectiveCall as CollectiveCall,
    ParallelLayout as ParallelLayout,
    StepComm as StepComm,
    Traffic as Traffic,
    calls_time as calls_time,
    simulate as simulate,
    simulate_collective as simulate_collective,
    step_traffic as step_traffic,
)
from willitscale.hardware import (
    Catalog as Catalog,
    Cluster as Cluster,
    Gpu as Gpu,
    Link as Link,
    LinkKind as LinkKind,
    Node as Node,
    Switch as Switch,
    build_cluster as build_cluster,
    get_gpu as get_gpu,
    get_link as get_link,
    get_node as get_node,
    list_gpus as list_gpus,
    list_links as list_links,
    list_nodes as list_nodes,
    load_catalog as load_catalog,
)
from willitscale.hardware.calibration import (
    Calibration as Calibration,
    ComputeCalibration as ComputeCalibration,
    LinkCalibration as LinkCalibration,
    load_calibration as load_calibration,
)
from willitscale.memory.activations import (
    ActivationMemory as ActivationMemory,
    activation_memory as activation_memory,
)
from willitscale.memory.state import (
    StateConvention as StateConvention,
    StateMemory as StateMemory,
    get_convention as get_convention,
    state_bytes_per_gpu as state_bytes_per_gpu,
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
    link_requirement as link_requirement,
    required_node_bandwidth as required_node_bandwidth,
)
from willitscale.plan.scaling import (
    scaling_rows as scaling_rows,
)
from willitscale.plan.search import (
    SearchResult as SearchResult,
    SearchSpace as SearchSpace,
    search_plans as search_plans,
)
from willitscale.plan.sizing import (
    gpus_for_deadline as gpus_for_deadline,
    gpus_to_hold_state as gpus_to_hold_state,
)
from willitscale.report.contents import (
    ReportContents as ReportContents,
    build_contents as build_contents,
)
from willitscale.report.html import (
    render_html as render_html,
)
from willitscale.report.plots.base import (
    Chart as Chart,
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
    DdpOptions as DdpOptions,
    Measured as Measured,
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
    Routing as Routing,
    Topology as Topology,
    build_topology as build_topology,
    max_cluster as max_cluster,
    parse_routing as parse_routing,
)
from willitscale.topology.placement import (
    GroupPlacement as GroupPlacement,
    group_placement as group_placement,
)
from willitscale.units import (
    format_bandwidth as format_bandwidth,
    format_count as format_count,
    format_flop_rate as format_flop_rate,
    format_flops as format_flops,
    format_size as format_size,
    format_time as format_time,
    parse_bandwidth as parse_bandwidth,
    parse_count as parse_count,
    parse_flop_rate as parse_flop_rate,
    parse_ports as parse_ports,
    parse_size as parse_size,
    parse_time as parse_time,
)
from willitscale.validation.linkrace import (
    LinkRace as LinkRace,
    lecture_case as lecture_case,
)
from willitscale.validation.published import (
    PublishedRun as PublishedRun,
)
from willitscale.workload import (
    LayerFlops as LayerFlops,
    ParamCount as ParamCount,
    TrainingFlops as TrainingFlops,
    Transformer as Transformer,
    embedding_params_per_tp_rank as embedding_params_per_tp_rank,
    get_model as get_model,
    handbook_tflop_per_gpu as handbook_tflop_per_gpu,
    head_params_per_tp_rank as head_params_per_tp_rank,
    kaplan_6pd as kaplan_6pd,
    korthikanti_model_flops as korthikanti_model_flops,
    layer_forward_flops as layer_forward_flops,
    layer_params_per_tp_rank as layer_params_per_tp_rank,
    list_models as list_models,
    load_hf_config as load_hf_config,
    narayanan_flops as narayanan_flops,
    palm_flops_per_token as palm_flops_per_token,
    param_count as param_count,
    recompute_8pd as recompute_8pd,
    tp_divides_shape as tp_divides_shape,
    training_flops as training_flops,
)

__all__: list[str]

def __dir__() -> list[str]: ...
