"""User catalog files: same format as the built-in one, typos caught with file and key named."""

import textwrap

import pytest

from willitscale.errors import ConfigError, UnknownNameError
from willitscale.hardware import Link, LinkKind, Node, build_cluster, load_catalog
from willitscale.hardware.catalog import catalog_dir
from willitscale.hardware.loader import encoding_efficiency

MY_GPU = """
[gpu.my-gpu]
vendor = "acme"
aliases = ["mine"]
memory_GiB = 96
memory_bandwidth_GBps = 4000
peak_TFLOPS = { bf16 = 1000, fp32 = 60 }
intra_node_link = "nvlink4"
default_nic = "roce-400g"
source = "acme datasheet"
"""


def write(tmp_path, text, name="extra.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_user_file_loads_like_builtin(tmp_path):
    cat = load_catalog(write(tmp_path, MY_GPU), home=False)
    gpu = cat.gpu("MINE")
    assert gpu.memory == 96 * 2**30 and gpu.peak("bf16") == 1000e12
    assert cat.origins["my-gpu"].endswith("extra.toml")
    assert "h100-sxm" in cat.gpus  # built-ins still there


def test_home_catalog_dir_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path / "home"))
    folder = catalog_dir()
    folder.mkdir(parents=True)
    write(folder, MY_GPU, "gpus.toml")
    cluster = build_cluster(gpu="mine", nodes=2)
    assert cluster.gpu.name == "my-gpu" and cluster.node.nic.name == "roce-400g" and cluster.node.nics == 8


def test_user_entry_overrides_builtin(tmp_path):
    cat = load_catalog(write(tmp_path, """
        [link.ib-ndr]
        kind = "infiniband"
        bandwidth = "400Gbps"
        efficiency = 0.9
        efficiency_source = "our nccl-tests, 2026-01"
        source = "our cluster"
    """), home=False)
    assert cat.link("ib-ndr").efficiency == 0.9
    assert cat.node("dgx-h100").nic.efficiency == 0.9  # nodes are built from the merged links


def test_an_override_keeps_the_builtin_aliases_unless_it_lists_its_own(tmp_path):
    # h100-sxm is also "h100" (built-in aliases): a user's measured override must not make
    # `--gpu h100` unknown, nor quietly mean something else
    entry = """
        [gpu.h100-sxm]
        display_name = "our H100s"
        vendor = "nvidia"
        memory_GiB = 80
        memory_bandwidth_GBps = 3000
        peak_TFLOPS = { bf16 = 900 }
        source = "our measurements"
        """
    cat = load_catalog(write(tmp_path, entry), home=False)
    assert cat.gpu("h100").peak_flops["bf16"] == 900e12
    cat = load_catalog(write(tmp_path, entry + 'aliases = ["ours"]\n', "own.toml"), home=False)
    assert cat.gpu("ours").peak_flops["bf16"] == 900e12
    with pytest.raises(UnknownNameError):
        cat.gpu("h100")


@pytest.mark.parametrize("text, match", [
    # unknown key, with the closest valid one suggested, and the file/entry named
    (MY_GPU.replace("memory_GiB", "memroy_GiB"),
     r"extra.toml: \[gpu.my-gpu\]: missing required key \(one of memory, memory_GiB"),
    (MY_GPU + "colour = 'red'\n", r"\[gpu.my-gpu\]: unknown key 'colour'"),
    # a unit the parser does not know
    ("""[link.x]\nkind = "infiniband"\nbandwidth = "200 Gbs"\nsource = "s"\n""", r"\[link.x\]: bandwidth = '200 Gbs'"),
    # a dtype typo inside peak_TFLOPS
    (MY_GPU.replace("bf16 = 1000", "bf61 = 1000"), r"peak_TFLOPS: unknown key 'bf61'"),
    # a reference to a name that does not exist, with a suggestion
    (MY_GPU.replace('"nvlink4"', '"nvlnk4"'), r"unknown link 'nvlnk4'.*nvlink4"),
    # a NIC where a GPU link belongs
    ("""[node.n]\ngpu = "h100"\ngpus_per_node = 8\nintra_link = "ib-ndr"\nnic = "ib-ndr"\nnics = 1\nsource = "s"\n""",
     "not a GPU-to-GPU link"),
    # sparse below dense: swapped columns
    (MY_GPU + "sparse_peak_TFLOPS = { bf16 = 500 }\n", "dense/sparse swapped"),
    # lanes x rate disagreeing with a given bandwidth
    ("""[link.x]\nkind = "nvlink"\nlinks = 18\nlanes = 2\nlane_rate_Gbps = 100\nbandwidth_GBps = 900\nsource = "s"\n""",
     "disagrees with links x lanes x lane rate"),
    # signaling x encoding disagreeing with the lane rate
    ("""[link.x]\nkind = "infiniband"\nlanes = 4\nlane_rate_Gbps = 50\nsignaling_Gbps = 25.78125\nencoding = "64b/66b"\nsource = "s"\n""",
     "signaling_Gbps x encoding"),
    # an own latency without saying where it comes from
    ("""[link.x]\nkind = "efa"\nbandwidth = "100Gbps"\nlatency_us = 5\nsource = "s"\n""", "latency_source"),
    # an unknown top-level section
    ("""[gpus.x]\nvendor = "a"\n""", "unknown key 'gpus'.*gpu"),
    # a 9-GPU full mesh with 7 links per GPU
    ("""[node.n]\ngpu = "mi300x"\ngpus_per_node = 9\nintra_link = "infinity-fabric-mi300x"\nnic = "ib-ndr"\nnics = 1\nsource = "s"\n""",
     "cannot be fully meshed"),
    # an alias that already names another entry
    (MY_GPU.replace('["mine"]', '["h100"]'), "name 'h100' means both"),
])
def test_bad_user_files_are_clear_errors(tmp_path, text, match):
    with pytest.raises(ConfigError, match=match):
        load_catalog(write(tmp_path, text), home=False)


def test_same_name_twice_in_one_layer_fails(tmp_path):
    a, b = write(tmp_path, MY_GPU, "a.toml"), write(tmp_path, MY_GPU, "b.toml")
    with pytest.raises(ConfigError, match="defined twice"):
        load_catalog(a, b, home=False)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="no such catalog file"):
        load_catalog(tmp_path / "nope.toml", home=False)


def test_edited_file_is_reloaded(tmp_path):
    path = write(tmp_path, MY_GPU)
    assert load_catalog(path, home=False).gpu("mine").memory == 96 * 2**30
    path.write_text(MY_GPU.replace("memory_GiB = 96", "memory_GiB = 128"))
    assert load_catalog(path, home=False).gpu("mine").memory == 128 * 2**30


@pytest.mark.parametrize("code, value", [
    ("128b/130b", 128 / 130), ("64b/66b", 64 / 66), ("242B/256B", 242 / 256),
    ("256b/257b+RS(544,514)", 256 / 257 * 514 / 544),
])
def test_encoding_efficiency(code, value):
    assert encoding_efficiency(code) == pytest.approx(value)


def test_encoding_efficiency_rejects_nonsense():
    with pytest.raises(ConfigError, match="line code"):
        encoding_efficiency("8b10b")


def test_model_objects_validate_themselves():
    link = Link(name="x", kind=LinkKind.NVLINK, bandwidth=450e9, latency=0, efficiency=0.8)
    with pytest.raises(ConfigError, match="does not match"):
        Link(name="y", kind=LinkKind.NVLINK, bandwidth=450e9, latency=0, efficiency=0.8,
             links=18, lanes=2, lane_rate=12.5e9 / 2)
    with pytest.raises(ConfigError, match="efficiency"):
        Link(name="z", kind=LinkKind.NVLINK, bandwidth=1e9, latency=0, efficiency=1.5)
    gpu = load_catalog(home=False).gpu("h100")
    with pytest.raises(ConfigError, match="at most 2 GPUs per NVLink bridge"):
        Node(name="n", gpu=gpu, gpus_per_node=4, intra_link=link, nic=link, nics=1,
             intra_topology="bridge-pairs")
    with pytest.raises(UnknownNameError):
        load_catalog(home=False).switch("nvswitch-v9")
