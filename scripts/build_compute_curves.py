"""Build ``src/willitscale/compute/curves.toml``: the compute model's built-in per-GPU curves.

    python scripts/build_compute_curves.py FACTS_TOML

``FACTS_TOML`` is a table of sourced kernel facts (one ``[[fact]]`` per published number, with
``id``, ``value``, ``citation``: /work/research/kernels/facts.toml in this project's history).
Each curve is fitted (:mod:`willitscale.calibrate.curves`) to the published points it names,
and written with those points (``data``) and their citations (``source``), so the test suite
can refit every entry from the file alone. Where a GPU has no published point of its own, the
entry says which GPU's curve it borrows and why (a named approximation).
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from willitscale.calibrate.curves import fit_attention_curve, fit_gemm_curve  # noqa: E402
from willitscale.hardware.catalog import get_gpu  # noqa: E402
from willitscale.hardware.profile import AttentionCurve, GemmCurve, MemoryCurve  # noqa: E402

OUT = ROOT / "src" / "willitscale" / "compute" / "curves.toml"
H100_BEST = [0.0, 0.0]  #: set by main(): the H100's best-shape efficiency and its curve's
KERNEL_GAP_HOPPER = 2.5e-6  #: smallkern-h200-stream: back-to-back tiny kernels on a stream
T = 1e12
GB = 1e9


class Facts:
    def __init__(self, path: str):
        self.by_id = {f["id"]: f for f in tomllib.loads(Path(path).read_text())["fact"]}

    def value(self, fid: str) -> float:
        return float(self.by_id[fid]["value"])

    def cite(self, *ids: str) -> str:
        cites = sorted({", ".join(self.by_id[i]["citation"].split(", ")[:2]) for i in ids})
        return "; ".join(cites)

    def matching(self, pattern: str) -> list[tuple[str, dict]]:
        rx = re.compile(pattern)
        return [(i, f) for i, f in self.by_id.items() if rx.fullmatch(i)]


def _shape(fact: dict) -> tuple[int, int, int]:
    text = fact["shape"]
    m = re.search(r"MxNxK=(\d+)x(\d+)x(\d+)", text)
    if m:
        return int(m.group(1)), int(m.group(2)), int(m.group(3))
    m = re.search(r"M=N=K=(\d+)", text)
    if m:
        v = int(m.group(1))
        return v, v, v
    m = re.search(r"M=(\d+),N=(\d+),K=(\d+)", text)
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def gemm_points(facts: Facts, ids) -> list[tuple[int, int, int, float]]:
    return [(*_shape(facts.by_id[i]), facts.value(i) * T) for i in ids]


# --------------------------------------------------------------------------------------------
# GEMM curves
# --------------------------------------------------------------------------------------------

def hopper_bf16(facts: Facts, bandwidth: float) -> GemmCurve:
    ids = ["mamf-h100-sxm-bf16", "h100-cublas-fp16-2048", "h100-cublas-fp16-4096",
           "h100-cublas-fp16-8192"]
    start = GemmCurve(dtype="bf16", peak_flop_rate=get_gpu("h100-sxm").peak("bf16"),
                      efficiency=0.8, k_half=500.0, tile_m=128, tile_n=256, sms=132,
                      kernel_overhead=KERNEL_GAP_HOPPER)
    curve = fit_gemm_curve(gemm_points(facts, ids), start, bandwidth=bandwidth, fit_overhead=False)
    return replace(curve, source=(
        "efficiency and k_half fitted to the Maximum Achievable Matmul FLOPS best shape "
        "of H100 SXM (torch.matmul) and three cuBLAS square GEMMs on H100 SXM: "
        + facts.cite(*ids) + "; tile 128 x 256, 132 SMs (" + facts.cite("sm-h100-sxm") + "); "
        "kernel_overhead: the gap between back-to-back kernels on a stream on Hopper, "
        + facts.cite("smallkern-h200-stream")))


def envelope_only(facts: Facts, fid: str, gpu: str, dtype: str, like: GemmCurve, *,
                  tile=None, sms: int, why: str, bandwidth: float = 0.0) -> GemmCurve:
    """A GPU with one best-shape point: the H100 bf16 curve's efficiency scaled by the ratio
    of the two GPUs' best-shape efficiencies (a named approximation: both best shapes sit at the
    same place on their curves); tile fill and overhead from ``like``."""
    tm, tn = tile or (like.tile_m, like.tile_n)
    peak = get_gpu(gpu).peak(dtype)
    (m, n, k, rate), = gemm_points(facts, [fid])
    ratio = (rate / peak) / H100_BEST[0]
    return replace(like, dtype=dtype, peak_flop_rate=peak, tile_m=tm, tile_n=tn, sms=sms,
                   efficiency=H100_BEST[1] * ratio, points=1, rms_error=0.0,
                   data=((float(m), float(n), float(k), rate / T),), source=(
        f"efficiency: the H100 bf16 curve's {H100_BEST[1]:.4f} times this GPU's best-shape "
        f"efficiency over the H100's ({rate / peak:.4f} / {H100_BEST[0]:.4f}; best shapes of "
        f"the Maximum Achievable Matmul FLOPS sweep, {facts.cite(fid)}, {fid}: a named "
        "approximation, both best shapes taken to sit at the same place on their curves); "
        + why))


# --------------------------------------------------------------------------------------------
# attention curves
# --------------------------------------------------------------------------------------------

def _series(facts: Facts, pattern: str) -> list[tuple[float, float]]:
    pts = []
    for i, f in facts.matching(pattern):
        s = int(re.search(r"-s(\d+)$", i).group(1))
        pts.append((s, float(f["value"]) * T))
    return sorted(pts)


def fa2_combined(facts: Facts, gpu_fact: str, gpu: str) -> list[AttentionCurve]:
    """FA2's forward+backward benchmark: one rate for both passes (a named approximation)."""
    out = []
    peak = get_gpu(gpu).peak("bf16")
    for causal in (True, False):
        for d in (64, 128):
            pat = rf"fa2-{gpu_fact}-fwdbwd-{'causal' if causal else 'full'}-d{d}-s\d+"
            pts = _series(facts, pat)
            ids = [i for i, _ in facts.matching(pat)]
            for direction in ("forward", "backward"):
                out.append(fit_attention_curve(
                    pts, peak=peak, kernel="fa2", direction=direction, causal=causal, head_dim=d,
                    source=("FlashAttention-2 forward+backward TFLOP/s (FA convention: causal "
                            "counts the unmasked half, backward 2.5x forward) read from the "
                            f"README figure: {facts.cite(*ids)}; the combined rate is used for "
                            "each pass (no per-pass figure for this GPU)")))
    return out


#: FlashAttention-2's forward TFLOP/s on H100 80GB SXM5 (FP16, batch x heads at 16K tokens,
#: causal counting the unmasked half), the FlashAttention-2 bars of the FA3 paper's forward-speed
#: figure (Shah et al. 2024, "FlashAttention-3", Figure 5 (a)-(d)) as the FA3 README shows it:
#: Dao-AILab/flash-attention @ 0251105a2fb19d2957484b7f023cd8c115286ced, assets/flash3_fp16_fwd.png
#: (read from the bar labels). Keys: (causal, head_dim); values at 512, 1K, 2K, 4K, 8K, 16K.
FA2_H100_FORWARD = {
    (False, 64): (282, 306, 318, 321, 322, 324),
    (True, 64): (180, 229, 262, 284, 295, 299),
    (False, 128): (309, 350, 362, 368, 370, 370),
    (True, 128): (191, 260, 298, 319, 333, 335),
}
FA2_H100_FORWARD_SOURCE = ("FlashAttention-2 forward TFLOP/s on H100 80GB SXM5 (FP16; causal counts "
                           "the unmasked half): the FlashAttention-2 bars of the FA3 paper's forward "
                           "figure (Shah et al. 2024, Figure 5 (a)-(d)) as the FA3 README shows it, "
                           "Dao-AILab/flash-attention @ 0251105a2fb19d2957484b7f023cd8c115286ced, "
                           "assets/flash3_fp16_fwd.png")
SEQS = (512, 1024, 2048, 4096, 8192, 16384)


def fa2_hopper_per_pass(facts: Facts) -> list[AttentionCurve]:
    """FA2 on H100, per pass: the forward from the FA3 paper's figure (its FlashAttention-2
    bars), the backward from FA2's own forward+backward figure and that forward. The combined
    rate ``R`` times a call of ``F`` forward FLOPs and ``2.5 F`` backward ones (FA's convention),
    so ``3.5 / R = 1 / R_fwd + 2.5 / R_bwd`` and ``R_bwd = 2.5 / (3.5 / R - 1 / R_fwd)`` at each
    length both figures give (a named approximation: the two figures come from FA2 releases a
    year apart)."""
    peak = get_gpu("h100-sxm").peak("bf16")
    out = []
    for causal in (True, False):
        for d in (64, 128):
            fwd = [(s, r * T) for s, r in zip(SEQS, FA2_H100_FORWARD[(causal, d)])]
            out.append(fit_attention_curve(
                fwd, peak=peak, kernel="fa2", direction="forward", causal=causal, head_dim=d,
                source=FA2_H100_FORWARD_SOURCE))
            pat = rf"fa2-h100-sxm-fwdbwd-{'causal' if causal else 'full'}-d{d}-s\d+"
            combined = dict(_series(facts, pat))
            ids = [i for i, _ in facts.matching(pat)]
            bwd = [(s, 2.5 / (3.5 / combined[s] - 1.0 / r)) for s, r in fwd if s in combined]
            out.append(fit_attention_curve(
                bwd, peak=peak, kernel="fa2", direction="backward", causal=causal, head_dim=d,
                source=("backward TFLOP/s derived as 2.5 / (3.5 / R_combined - 1 / R_forward) from "
                        "FlashAttention-2's forward+backward README figure "
                        f"({facts.cite(*ids)}) and its forward bars in the FA3 paper's figure "
                        "(Dao-AILab/flash-attention @ 0251105a2fb19d2957484b7f023cd8c115286ced, "
                        "assets/flash3_fp16_fwd.png): a named approximation, the figures come "
                        "from FA2 releases a year apart")))
    return out


def hopper_kernel(facts: Facts, name: str, fact_name: str) -> list[AttentionCurve]:
    """FA3 or cuDNN on H100: forward from the FA3 README figure (strong), backward from a
    transcription of the FA3 paper's figure (weak; read as non-causal), causal backward as the
    non-causal backward times the forward's causal/non-causal ratio at the same length."""
    peak = get_gpu("h100-sxm").peak("bf16")
    out = []
    for d in (64, 128, 256):
        fwd = {}
        for causal in (True, False):
            pat = rf"fa3fig-{fact_name}-h100-fwd-{'causal' if causal else 'full'}-d{d}-s\d+"
            pts = _series(facts, pat)
            fwd[causal] = dict(pts)
            ids = [i for i, _ in facts.matching(pat)]
            out.append(fit_attention_curve(
                pts, peak=peak, kernel=name, direction="forward", causal=causal, head_dim=d,
                source=f"forward TFLOP/s read from the FA3 README figure: {facts.cite(*ids)}"))
        pat = rf"fa3paper-{fact_name}-h100-bwd-d{d}-s\d+"
        bwd = _series(facts, pat)
        if not bwd:
            continue
        ids = [i for i, _ in facts.matching(pat)]
        out.append(fit_attention_curve(
            bwd, peak=peak, kernel=name, direction="backward", causal=False, head_dim=d,
            source=("backward TFLOP/s from a transcription of the FA3 paper's H100 figure, read "
                    f"as non-causal (weak): {facts.cite(*ids)}")))
        causal_bwd = [(s, r * fwd[True][s] / fwd[False][s]) for s, r in bwd if s in fwd[True]]
        out.append(fit_attention_curve(
            causal_bwd, peak=peak, kernel=name, direction="backward", causal=True, head_dim=d,
            source=("the non-causal backward points scaled by the forward's causal / non-causal "
                    f"ratio at the same length (derived): {facts.cite(*ids)}")))
    return out


def scaled_kernel(curves, *, kernel: str, factor: float, why: str) -> list[AttentionCurve]:
    return [replace(c, kernel=kernel, efficiency=min(c.efficiency * factor, 1.0), data=(),
                    points=0, rms_error=0.0, source=f"{why} (from: {c.source})")
            for c in curves]


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------

def entry_lines(prefix: str, entry) -> list[str]:
    lines = entry.toml_lines()
    head = lines[0].strip("[]")
    return [f'[[gpu."{prefix}".{head}]]', *lines[1:]]


def main(argv=None) -> int:
    facts = Facts((argv or sys.argv[1:])[0])
    gpus: dict[str, dict] = {}

    def memory(gpu: str, achieved_GBps: float, overhead_us: float, why: str) -> MemoryCurve:
        return MemoryCurve(bandwidth=achieved_GBps * GB, kernel_overhead=overhead_us * 1e-6,
                           source=why)

    h100_bw = 0.852 * get_gpu("h100-sxm").memory_bandwidth / GB
    mem = {
        "a100-80gb-sxm": memory("a100-80gb-sxm", facts.value("stream-a100-80gb-sxm-scale"),
                                2.6, "copy-like (scale) STREAM kernel, max over an occupancy "
                                f"scan: {facts.cite('stream-a100-80gb-sxm-scale')}; kernel "
                                "overhead: back-to-back tiny kernels on a stream, lower end of "
                                f"2.6-4.4 us ({facts.cite('smallkern-a100-stream')})"),
        "a100-40gb-sxm": memory("a100-40gb-sxm", facts.value("stream-a100-40gb-sxm-scale"), 2.6,
                                f"copy-like STREAM kernel: {facts.cite('stream-a100-40gb-sxm-scale')};"
                                " kernel overhead as the A100 80GB"),
        "a100-80gb-pcie": memory("a100-80gb-pcie", 0.852 * 1935, 2.6,
                                 "no measurement: the A100 80GB SXM's achieved fraction (1737 / "
                                 "2039 = 0.852) of this card's 1935 GB/s (named approximation)"),
        "a100-40gb-pcie": memory("a100-40gb-pcie", facts.value("stream-a100-40gb-sxm-scale"), 2.6,
                                 "no measurement: the A100 40GB SXM's (same HBM2 stacks and "
                                 "1555 GB/s)"),
        "h100-pcie": memory("h100-pcie", facts.value("stream-h100-pcie-scale"), 2.5,
                            f"copy-like STREAM kernel: {facts.cite('stream-h100-pcie-scale')}; "
                            "kernel overhead: back-to-back tiny kernels on a stream on Hopper "
                            f"(H200) {facts.cite('smallkern-h200-stream')}"),
        "h100-sxm": memory("h100-sxm", h100_bw, 2.5,
                           "no STREAM figure for the SXM card: the H100 PCIe's achieved fraction "
                           "(1704 / 2000 = 0.852) of 3350 GB/s (named approximation); kernel "
                           f"overhead: {facts.cite('smallkern-h200-stream')} (H200, Hopper)"),
        "h200-sxm": memory("h200-sxm", 0.852 * 4800, 2.5,
                           "no STREAM figure: the H100 PCIe's achieved fraction (0.852) of "
                           "4800 GB/s (named approximation); kernel overhead: "
                           f"{facts.cite('smallkern-h200-stream')}"),
        "b200": memory("b200", facts.value("ao-b200-cast-dim0_mxfp8_floor"), 2.5,
                       "a bf16 -> MXFP8 cast kernel (read 2 + write 1 bytes per element) at "
                       f"0.84 of 7.7 TB/s: {facts.cite('ao-b200-cast-dim0_mxfp8_floor')}; "
                       "kernel overhead: Hopper's (no Blackwell figure)"),
        "mi300x": memory("mi300x", facts.value("stream-mi300x-scale"), 2.5,
                         f"copy-like STREAM kernel: {facts.cite('stream-mi300x-scale')}; kernel "
                         "overhead: Hopper's (no MI300X figure)"),
    }

    bf16 = hopper_bf16(facts, mem["h100-sxm"].bandwidth)
    H100_BEST[:] = [facts.value("mamf-h100-sxm-bf16") * T / get_gpu("h100-sxm").peak("bf16"),
                    bf16.efficiency]
    h100_fp8 = envelope_only(
        facts, "mamf-h100-sxm-fp8_e4m3", "h100-sxm", "fp8", bf16, sms=132, bandwidth=mem["h100-sxm"].bandwidth,
        why=("k_half and overhead as the bf16 curve (DeepGEMM's FP8 rows at M = 4096 fall with K "
             f"as this k_half says: {facts.cite('deepgemm-h800-4096x7168x16384')})"))
    h200_fp8 = envelope_only(
        facts, "mamf-h200-sxm-fp8_e4m3", "h200-sxm", "fp8", h100_fp8, sms=132, bandwidth=mem["h200-sxm"].bandwidth, why="tile fill and overhead as the H100's FP8 curve")
    a100 = envelope_only(
        facts, "mamf-a100-80gb-sxm-bf16", "a100-80gb-sxm", "bf16",
        replace(bf16, kernel_overhead=mem["a100-80gb-sxm"].kernel_overhead), tile=(128, 128),
        sms=108, bandwidth=mem["a100-80gb-sxm"].bandwidth,
        why=("tile 128 x 128 (Ampere's cuBLAS tiles are smaller than Hopper's: a named "
             f"approximation), 108 SMs ({facts.cite('sm-a100-80gb-sxm')}); k_half as the H100 "
             "bf16 curve; kernel overhead: A100's back-to-back kernel gap "
             f"({facts.cite('smallkern-a100-stream')})"))
    a100_pcie = envelope_only(
        facts, "mamf-a100-pcie-bf16", "a100-80gb-pcie", "bf16", a100, sms=108,
        bandwidth=mem["a100-80gb-pcie"].bandwidth, why="tile, fill and overhead as the A100 SXM")
    b200_bf16 = envelope_only(
        facts, "mamf-b200-bf16", "b200", "bf16", bf16, sms=148, bandwidth=mem["b200"].bandwidth,
        why=(f"148 SMs ({facts.cite('sm-b200')}); tile, k_half and overhead as the H100 bf16 "
             "curve (no per-shape Blackwell figure)"))
    b200_fp8 = envelope_only(
        facts, "mamf-b200-fp8_e4m3", "b200", "fp8", h100_fp8, sms=148, bandwidth=mem["b200"].bandwidth, why="tile, fill and overhead as the H100 FP8 curve")
    mi_bf16 = envelope_only(
        facts, "mamf-mi300x-bf16", "mi300x", "bf16", bf16, tile=(256, 256), sms=304,
        bandwidth=mem["mi300x"].bandwidth,
        why=(f"304 CUs and tiles up to 256 x 256 ({facts.cite('amd-maf-tiles')}); k_half and "
             "overhead as the H100 bf16 curve"))
    mi_fp8 = envelope_only(
        facts, "amd-maf-mi300x-fp8_fnuz", "mi300x", "fp8", mi_bf16, sms=304, bandwidth=mem["mi300x"].bandwidth,
        why="AMD's max-achievable FLOPS measurement (median clocks); k_half as H100's")
    h100_pcie = replace(bf16, peak_flop_rate=get_gpu("h100-pcie").peak("bf16"), sms=114,
                        data=(), points=0, rms_error=0.0,
                        source=("no per-shape figure: the H100 SXM curve's constants with the "
                                f"PCIe card's 114 SMs ({facts.cite('sm-h100-pcie')}) and its "
                                "own datasheet peak (named approximation)"))
    h100_pcie_fp8 = replace(h100_fp8, peak_flop_rate=get_gpu("h100-pcie").peak("fp8"), sms=114,
                            data=(), points=0, rms_error=0.0,
                            source="the H100 SXM FP8 curve with 114 SMs and the PCIe peak")

    def fp16(c: GemmCurve) -> GemmCurve:
        return replace(c, dtype="fp16", source="the bf16 curve (same tensor-core rate): " + c.source)

    # attention
    a100_attn = fa2_combined(facts, "a100-80gb-sxm", "a100-80gb-sxm")
    h100_fa2 = fa2_hopper_per_pass(facts)
    fa3 = hopper_kernel(facts, "fa3", "flashattention-3")
    cudnn = hopper_kernel(facts, "cudnn", "cudnn")
    fa3_full_fwd = next(c for c in fa3 if c.direction == "forward" and not c.causal and c.head_dim == 128)
    fa4_factor = (facts.value("fa4-b200") * T / get_gpu("b200").peak("bf16")) / fa3_full_fwd.efficiency
    b200_attn = scaled_kernel(
        fa3, kernel="fa4", factor=fa4_factor,
        why=(f"FlashAttention-4 reaches {facts.value('fa4-b200'):g} TFLOP/s on B200 "
             f"({facts.cite('fa4-b200')}), {fa4_factor:.3f}x the efficiency of FA3's non-causal "
             "d128 forward on H100: every FA3 curve scaled by that ratio (named approximation: "
             "no per-length B200 figure)"))
    mi_factor = mi_bf16.efficiency / bf16.efficiency
    mi_attn = scaled_kernel(
        fa3, kernel="ck", factor=mi_factor,
        why=(f"no MI300X attention figure: H100 FA3 curves times the ratio of the GEMM envelopes "
             f"({mi_factor:.3f}, named approximation)"))

    gpus["a100-80gb-sxm"] = dict(arch="ampere", kernel="fa2", gemm=[a100, fp16(a100)], attention=a100_attn,
                                 memory=mem["a100-80gb-sxm"])
    gpus["a100-40gb-sxm"] = dict(same_as="a100-80gb-sxm", memory=mem["a100-40gb-sxm"],
                                 why="same SMs and clocks as the A100 80GB SXM")
    gpus["a800-80gb-sxm"] = dict(same_as="a100-80gb-sxm",
                                 why="same silicon, clocks and HBM as the A100 80GB SXM")
    gpus["a100-80gb-pcie"] = dict(same_as="a100-80gb-sxm", gemm=[a100_pcie, fp16(a100_pcie)],
                                  memory=mem["a100-80gb-pcie"],
                                  why="attention as the SXM card (no PCIe figure)")
    gpus["a100-40gb-pcie"] = dict(same_as="a100-80gb-pcie", memory=mem["a100-40gb-pcie"],
                                  why="the A100 PCIe curves")
    gpus["h100-sxm"] = dict(arch="hopper", kernel="fa3", gemm=[bf16, fp16(bf16), h100_fp8],
                            attention=h100_fa2 + fa3 + cudnn, memory=mem["h100-sxm"])
    gpus["h800-sxm"] = dict(same_as="h100-sxm", why="same silicon and clocks as the H100 SXM")
    gpus["h200-sxm"] = dict(same_as="h100-sxm", gemm=[h200_fp8], memory=mem["h200-sxm"],
                            why=("same SMs and clocks as the H100 SXM: 'H200 is the same' for "
                                 "bf16 in the Maximum Achievable Matmul FLOPS table"))
    gpus["h100-pcie"] = dict(same_as="h100-sxm", gemm=[h100_pcie, fp16(h100_pcie), h100_pcie_fp8],
                             memory=mem["h100-pcie"], why="attention as the SXM card (named)")
    gpus["b200"] = dict(arch="blackwell", kernel="fa4", gemm=[b200_bf16, fp16(b200_bf16), b200_fp8],
                        attention=b200_attn, memory=mem["b200"])
    gpus["mi300x"] = dict(arch="cdna3", kernel="ck", gemm=[mi_bf16, fp16(mi_bf16), mi_fp8], attention=mi_attn,
                          memory=mem["mi300x"])

    lines = ["# The compute model's built-in per-GPU curves (willitscale.compute.curves).",
             "# Written by scripts/build_compute_curves.py from published kernel benchmarks: every",
             "# entry has its source and, where fitted, the points it was fitted to (data, in",
             "# TFLOP/s); tests/unit/test_compute_curves.py refits them. Sections and keys are",
             "# those of a measured profile (docs/measure.md): a measured entry replaces these.",
             "# same_as: a GPU that takes another's entries except those it lists itself.",
             "# architecture: which sustained-rate factor applies (willitscale.compute.sustained)."]
    for gpu, spec in gpus.items():
        lines += ["", f'[gpu."{gpu}"]']
        if "same_as" in spec:
            lines += [f'same_as = "{spec["same_as"]}"', f'same_as_why = "{spec["why"]}"']
        if "arch" in spec:
            lines.append(f'architecture = "{spec["arch"]}"')
        if "kernel" in spec:
            lines.append(f'attention_kernel = "{spec["kernel"]}"')
        for entry in spec.get("gemm", []):
            lines += ["", *entry_lines(gpu, entry)]
        for entry in spec.get("attention", []):
            lines += ["", *entry_lines(gpu, entry)]
        if "memory" in spec:
            lines += ["", *entry_lines(gpu, spec["memory"])]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")
    print(f"h100 bf16: eff {bf16.efficiency:.3f} k_half {bf16.k_half:.0f} overhead "
          f"{bf16.kernel_overhead * 1e6:.2f} us rms {bf16.rms_error:.3f}")
    for c in (h100_fp8, h200_fp8, a100, a100_pcie, b200_bf16, b200_fp8, mi_bf16, mi_fp8):
        print(f"{c.dtype} peak {c.peak_flop_rate / T:.0f}: eff {c.efficiency:.3f}")
    for c in a100_attn[:4] + fa3 + h100_fa2[:4]:
        print(f"{c.kernel} {c.direction} causal={c.causal} d{c.head_dim}: eff {c.efficiency:.3f} "
              f"s0 {c.seq_half:.0f} rms {c.rms_error:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
