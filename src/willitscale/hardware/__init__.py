"""Hardware: GPUs, links, nodes, clusters, and the catalog they are loaded from."""

from willitscale.hardware.catalog import (
                                          Catalog,
                                          catalog_dir,
                                          get_gpu,
                                          get_link,
                                          get_node,
                                          get_switch,
                                          list_gpus,
                                          list_links,
                                          list_nodes,
                                          list_switches,
                                          load_catalog,
)
from willitscale.hardware.cluster import build_cluster, parse_link_spec
from willitscale.hardware.loader import LinkDefaults
from willitscale.hardware.model import (
                                          DTYPES,
                                          INTRA_TOPOLOGIES,
                                          Cluster,
                                          Gpu,
                                          Link,
                                          LinkKind,
                                          Node,
                                          Switch,
)

__all__ = ["DTYPES", "INTRA_TOPOLOGIES", "Catalog", "Cluster", "Gpu", "Link", "LinkDefaults", "LinkKind",
           "Node", "Switch", "build_cluster", "catalog_dir", "get_gpu", "get_link", "get_node",
           "get_switch", "list_gpus", "list_links", "list_nodes", "list_switches", "load_catalog",
           "parse_link_spec"]
