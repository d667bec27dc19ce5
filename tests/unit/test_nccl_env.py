"""NCCL environment settings as NCCL applies them (collectives/nccl/env.py; NCCL v2.30.7-1)."""

from __future__ import annotations

import json

import pytest

from willitscale.collectives.nccl.env import ENV_KEYS, parse_nccl_env
from willitscale.collectives.nccl.run import nccl_choice
from willitscale.collectives.nccl.system import NcclSystem, search_graphs
from willitscale.collectives.nccl.tables import NcclAlgorithm as A
from willitscale.collectives.nccl.tables import Protocol as P
from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError
from willitscale.validation.nccl_check import system_for
from willitscale.validation.nccl_tests import load_sweeps


@pytest.mark.parametrize("settings,default,expected", [
    ({}, 16, 16),
    # connect.cc 503-505: copied up to MIN_CTAS
    ({"NCCL_MIN_CTAS": 24}, 16, 24),
    # capped at MAX_CTAS, then copied up to the min, which init.cc 2190-2193 lowers to the max
    ({"NCCL_MIN_CTAS": 8, "NCCL_MAX_CTAS": 4}, 16, 4),
    ({"NCCL_MAX_NCHANNELS": 2}, 16, 2),
    # MIN_NCHANNELS above 64 is limited to MAXCHANNELS (connect.cc 338-341)
    ({"NCCL_MIN_NCHANNELS": 100}, 16, 64),
    # MIN_CTAS below the default changes nothing (copyChannels only adds)
    ({"NCCL_MIN_CTAS": 4}, 16, 16),
])
def test_runtime_channels(settings, default, expected):
    assert parse_nccl_env(settings).runtime_channels(default) == expected


def test_algo_and_proto_lists_and_exclusions():
    env = parse_nccl_env(["NCCL_ALGO=ring,Tree", "NCCL_PROTO=^LL128"])
    assert env.algorithms == frozenset({A.RING, A.TREE})
    assert env.protocols == frozenset({P.LL, P.SIMPLE})
    assert env.allows(A.RING, P.SIMPLE) and not env.allows(A.RING, P.LL128)
    assert not env.allows(A.NVLS, P.SIMPLE)


@pytest.mark.parametrize("entry,field", [
    ("NCCL_FOO=1", "nccl_env"), ("NCCL_ALGO=allreduce:tree", "NCCL_ALGO"), ("NCCL_PROTO=fast", "NCCL_PROTO"),
    ("NCCL_MIN_CTAS=many", "NCCL_MIN_CTAS"), ("NCCL_MIN_CTAS", "nccl_env"), ("NCCL_MAX_CTAS=-1", "NCCL_MAX_CTAS"),
    # 0 bytes per chunk or buffer, 0 channels or 0 GB/s per network peer: not applied as given,
    # so refused (they were accepted and silently replaced by NCCL's default)
    ("NCCL_P2P_NET_CHUNKSIZE=0", "NCCL_P2P_NET_CHUNKSIZE"), ("NCCL_BUFFSIZE=0", "NCCL_BUFFSIZE"),
    ("NCCL_NCHANNELS_PER_NET_PEER=0", "NCCL_NCHANNELS_PER_NET_PEER"),
    ("NCCL_P2P_PER_CHANNEL_NET_BW=0", "NCCL_P2P_PER_CHANNEL_NET_BW"),
])
def test_bad_settings_name_what_is_valid(entry, field):
    with pytest.raises(ConfigError) as info:
        parse_nccl_env([entry])
    assert info.value.field == field


def test_unknown_key_lists_the_modelled_ones():
    with pytest.raises(ConfigError) as info:
        parse_nccl_env({"NCCL_IB_QPS_PER_CONNECTION": 2})
    assert all(k in str(info.value) for k in ENV_KEYS)


def _h100_2n(**env):
    return NcclSystem(ranks=16, ranks_per_node=8, compute_capability=9.0, gpu_bandwidth_GBps=370.8,
                      path_bandwidth_GBps=370.8, nvswitch=True, in_switch_reduction=True, net_devices=8.0,
                      net_device_GBps=50.0, pcie_GBps=48.0, env=parse_nccl_env(env))


def test_min_ctas_raises_the_runtime_channels_not_the_tuned_graph():
    # NCCL's tuner costs graph->nChannels (tuning.cc 324): the ring graph is unchanged, the
    # communicator's channels (comm->nChannels) go from 16 to 24
    base, ctas = search_graphs(_h100_2n()), search_graphs(_h100_2n(NCCL_MIN_CTAS=24))
    assert base.ring == ctas.ring and (base.runtime_channels, ctas.runtime_channels) == (16, 24)


def test_nccl_algo_restricts_the_pick():
    free = nccl_choice(Op.ALL_REDUCE, [1 << 30], _h100_2n())
    ring = nccl_choice(Op.ALL_REDUCE, [1 << 30], _h100_2n(NCCL_ALGO="Ring"))
    assert free.pairs[int(free.index[0])].algorithm is not A.RING  # NVLSTree on this node
    assert {p.algorithm for p in ring.pairs} == {A.RING} and ring.forced
    with pytest.raises(ConfigError):  # no pair left: named
        nccl_choice(Op.ALL_GATHER, [1 << 20], _h100_2n(NCCL_ALGO="Tree"))


def test_validation_rows_carry_the_settings_their_source_states():
    sweeps = {s.id: s for s in load_sweeps()}
    sweep = sweeps["i309-h100-2n-ring-ctas24-allreduce"]
    assert "NCCL_ALGO=Ring" in sweep.flags_env and "NCCL_MIN_CTAS=24" in sweep.flags_env
    system = system_for(sweep)
    assert system.env.min_ctas == 24 and system.env.algorithms == frozenset({A.RING})
    for s in sweeps.values():  # every carried setting is one the sweep's flags state
        for key, value in s.setup.nccl_env:
            assert f"{key}={value}".lower() in s.flags_env.lower().replace("-x ", ""), (s.id, key)


def test_cli_nccl_env(cli):
    code, out, err = cli("collective", "all_reduce", "--size", "1GiB", "--ranks", "16", "--node", "dgx-h100",
                         "--nccl-env", "NCCL_ALGO=ring", "--nccl-env", "NCCL_MIN_CTAS=24", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["algorithm"] == "Ring" and data["runtime_channels"] == 24
    assert data["nccl_env"] == {"NCCL_ALGO": "ring", "NCCL_MIN_CTAS": "24"}
    code, out, err = cli("collective", "all_reduce", "--size", "1GiB", "--ranks", "16", "--node", "dgx-h100",
                         "--nccl-env", "NCCL_IB_HCA=mlx5")
    assert code != 0 and "NCCL_MIN_CTAS" in err
