"""Apple M-series GPU spec table (chips.toml) and `hardware_profile`."""

from __future__ import annotations

import platform
import re
import subprocess
import tomllib
from functools import cache

from pydantic import BaseModel, computed_field

from mlxport.knowledge.docs import KB_DIR, Section, cite, slugify
from mlxport.spec import CoreFigures, Datasheet

CHIPS_FILE = KB_DIR / "chips.toml"
# Metal limits shared by every M-series chip (Apple7..Apple10), see docs/metal-limits.md.
_LIMIT_SOURCES = ("S1", "S3", "S4t")


class ChipProfile(BaseModel):
    """One GPU configuration. Where a chip ships binned, cores/bandwidth/TFLOPS are the largest
    config unless a variant such as "M3 Max (30-core)" was asked for; `gpu_core_options` lists all
    configs."""

    name: str
    generation: str
    gpu_family: str
    architecture: str | None = None
    gpu_cores: int
    gpu_core_options: list[int]
    memory_bandwidth_gbs: float
    bandwidth_by_cores: dict[int, float] = {}
    fp32_tflops: float
    fp16_tflops: float | None = None  # None: not known, use fp32_tflops
    memory_gb: int  # largest memory configuration
    simd_width: int = 32
    max_threads_per_threadgroup: int = 1024
    threadgroup_memory_bytes: int = 32768
    features: list[str] = []
    notes: list[str] = []
    sources: list[str] = []

    @computed_field
    @property
    def ridge_flop_per_byte(self) -> float:
        """FP32 FLOPs per DRAM byte at which a kernel turns compute-bound."""
        return round(self.fp32_tflops * 1000 / self.memory_bandwidth_gbs, 2)

    def datasheet(self) -> Datasheet:
        return Datasheet(
            name=self.name,
            memory_bandwidth_gbs=self.memory_bandwidth_gbs,
            fp32_tflops=self.fp32_tflops,
            cores=self.core_figures(),
        )

    def core_figures(self) -> CoreFigures:
        """What the simulator's cost estimate charges on this chip (chips.toml [cost_model]); the
        clock is derived from the FP32 peak."""
        m = _table()["cost_model"]
        clock = self.fp32_tflops * 1e3 / (self.gpu_cores * m["flops_per_core_cycle"])
        return CoreFigures(
            gpu_cores=self.gpu_cores,
            clock_ghz=round(clock, 4),
            max_threads_per_core=m["max_threads_per_core"],
            threadgroup_memory_per_core=m["threadgroup_memory_per_core_bytes"],
            line_bytes=m["cache_line_bytes"],
            core_bytes_per_cycle=m["core_bytes_per_cycle"],
            threadgroup_bytes_per_cycle=m["threadgroup_bytes_per_cycle"],
            threadgroup_banks=m["threadgroup_banks"],
            bank_bytes=m["threadgroup_bank_bytes"],
            simd_function_cycles=m["simd_function_cycles"],
            schedulers_per_core=m["schedulers_per_core"],
            alu_saturation_simdgroups=m["alu_saturation_simdgroups"],
            dram_latency_ns=m["dram_latency_ns"],
            threadgroup_latency_ns=m["threadgroup_latency_ns"],
        )


@cache
def _table() -> dict:
    return tomllib.loads(CHIPS_FILE.read_text(encoding="utf-8"))


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower()).replace("apple", "")


def list_chips() -> list[str]:
    return [row["name"] for row in _table()["chip"]]


def _row_profile(row: dict) -> ChipProfile:
    family = _table()["families"][row["gpu_family"]]
    tags = list(dict.fromkeys([*row["sources"], *family["sources"], *_LIMIT_SOURCES]))
    return ChipProfile(
        name=row["name"],
        generation=row["generation"],
        gpu_family=row["gpu_family"],
        architecture=row.get("architecture"),
        gpu_cores=max(row["gpu_core_options"]),
        gpu_core_options=row["gpu_core_options"],
        memory_bandwidth_gbs=row["memory_bandwidth_gbs"],
        bandwidth_by_cores={int(k): v for k, v in row.get("bandwidth_by_cores", {}).items()},
        fp32_tflops=row["fp32_tflops"],
        fp16_tflops=row.get("fp16_tflops"),
        memory_gb=row["memory_gb"],
        features=family["features"],
        notes=row.get("notes", []),
        sources=[cite(t) for t in tags],
    )


def _variant(profile: ChipProfile, cores: int) -> ChipProfile:
    if cores not in profile.gpu_core_options:
        opts = " or ".join(str(c) for c in profile.gpu_core_options)
        raise ValueError(f"{profile.name} has {opts} GPU cores in the table, not {cores}.")
    if cores == profile.gpu_cores:
        return profile
    scale = cores / profile.gpu_cores
    fp16 = None if profile.fp16_tflops is None else round(profile.fp16_tflops * scale, 3)
    note = (
        f"[derived] FP32/FP16 scaled by cores from the {profile.gpu_cores}-core figure; "
        "bandwidth is the listed figure for this config."
    )
    return profile.model_copy(
        update={
            "name": f"{profile.name} ({cores}-core)",
            "gpu_cores": cores,
            "memory_bandwidth_gbs": profile.bandwidth_by_cores.get(
                cores, profile.memory_bandwidth_gbs
            ),
            "fp32_tflops": round(profile.fp32_tflops * scale, 3),
            "fp16_tflops": fp16,
            "notes": [*profile.notes, note],
        }
    )


_NAME = re.compile(r"^(m[1-9](?:pro|max|ultra)?)(?:(\d+)(?:core|c)?(?:gpu)?)?$")


def _lookup(name: str) -> ChipProfile:
    m = _NAME.match(_norm(name))
    rows = {_norm(row["name"]): row for row in _table()["chip"]}
    if not m or m.group(1) not in rows:
        raise ValueError(f"Unknown chip {name!r}; valid names: {', '.join(list_chips())}.")
    profile = _row_profile(rows[m.group(1)])
    return _variant(profile, int(m.group(2))) if m.group(2) else profile


def hardware_profile(chip: str = "auto") -> ChipProfile:
    """Spec row for `chip` ("M3 Max", "m3max", "Apple M3 Max", "M3 Max (30-core)") or the local
    chip."""
    if chip.strip().lower() != "auto":
        return _lookup(chip)
    name, cores = detect_chip()
    profile = _lookup(name)
    return _variant(profile, cores) if cores in profile.gpu_core_options else profile


def local_datasheet() -> Datasheet | None:
    """This Mac's GPU figures (its own core-count variant), or None where no Apple GPU is found:
    what an uncalibrated GPU's roofline fraction is of."""
    try:
        return hardware_profile("auto").datasheet()
    except (ValueError, KeyError):
        return None


def detect_chip() -> tuple[str, int | None]:
    """(chip name, GPU core count or None) of this Mac; ValueError elsewhere."""
    if platform.system() != "Darwin" or platform.machine() != "arm64":
        raise ValueError(
            "Cannot detect an Apple GPU on this machine; name a chip, e.g. "
            f"hardware_profile('M3 Max') (valid: {', '.join(list_chips())})."
        )
    name = _mlx_device_name() or _run(["sysctl", "-n", "machdep.cpu.brand_string"])
    if not name:
        raise ValueError(
            "Could not read the chip name; name a chip, e.g. hardware_profile('M3 Max')."
        )
    cores = re.search(
        r'"gpu-core-count"\s*=\s*(\d+)', _run(["ioreg", "-rc", "AGXAccelerator", "-d1"])
    )
    return name.strip(), int(cores.group(1)) if cores else None


def _mlx_device_name() -> str:
    try:
        import mlx.core as mx

        if not mx.metal.is_available():
            return ""
        info = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()
        return str(info.get("device_name", ""))
    except Exception:  # mlx missing or too old: fall back to sysctl
        return ""


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _fmt(x: float | None) -> str:
    return "unknown" if x is None else f"{x:g}"


def chip_text(p: ChipProfile, limits: bool = True) -> str:
    cores = " or ".join(str(c) for c in p.gpu_core_options)
    if p.bandwidth_by_cores:
        bw = " / ".join(f"{v:g} GB/s ({c}-core)" for c, v in sorted(p.bandwidth_by_cores.items()))
    else:
        bw = f"{p.memory_bandwidth_gbs:g} GB/s"
    lines = [
        f"{p.name}: generation {p.generation}, GPU family {p.gpu_family}, architecture "
        f"{p.architecture} "
        f"(UNCERTAIN unless noted).",
        f"GPU cores: {cores}. Memory bandwidth: {bw}. Max unified memory: {p.memory_gb} GB.",
        f"FP32: {_fmt(p.fp32_tflops)} TFLOPS ({p.gpu_cores}-core). FP16 (non-matrix): "
        f"{_fmt(p.fp16_tflops)} TFLOPS. Ridge point: {p.ridge_flop_per_byte:g} FP32 FLOP/byte "
        f"[derived].",
        *(
            [
                f"Limits: SIMD width {p.simd_width}, up to {p.max_threads_per_threadgroup} threads "
                f"per "
                f"threadgroup, {p.threadgroup_memory_bytes // 1024} KB threadgroup memory."
            ]
            if limits
            else []
        ),
        f"Features: {'; '.join(p.features)}.",
        *(f"- {n}" for n in p.notes),
    ]
    return "\n".join(lines)


def _row_tags(row: dict) -> tuple[str, ...]:
    family = _table()["families"][row["gpu_family"]]
    return tuple(dict.fromkeys([*row["sources"], *family["sources"]]))


def chip_sections() -> list[Section]:
    """Index sections generated from chips.toml: one per chip plus a summary table."""
    out = [_summary_section()]
    for row in _table()["chip"]:
        p = _row_profile(row)
        tags = _row_tags(row)
        out.append(
            Section(
                id=f"chips#{slugify(p.name)}",
                doc_id="chips",
                doc_title="Apple GPU chip table",
                heading=p.name,
                text=chip_text(p, limits=False),
                source_line=", ".join(tags),
                source_tags=tags,
                applies_to=(p.name, p.generation, p.gpu_family),
                tags=("chip", "spec", "cores", "bandwidth", "tflops", "memory"),
            )
        )
    return out


def _summary_section() -> Section:
    rows = [
        "| Chip | GPU cores | Bandwidth GB/s | FP32 TFLOPS | Max memory GB | Family |",
        "|---|---|---|---|---|---|",
    ]
    tags: list[str] = []
    for row in _table()["chip"]:
        p = _row_profile(row)
        bw = (
            "/".join(f"{v:g}" for _, v in sorted(p.bandwidth_by_cores.items()))
            or f"{p.memory_bandwidth_gbs:g}"
        )
        cores = "/".join(str(c) for c in p.gpu_core_options)
        rows.append(
            f"| {p.name} | {cores} | {bw} | {p.fp32_tflops:g} | {p.memory_gb} | {p.gpu_family} |"
        )
        tags.extend(row["sources"])
    text = (
        "Comparison of all Apple M-series chips (M1 to M5): GPU cores, memory bandwidth, FP32 "
        "TFLOPS, "
        "max memory and GPU family side by side. Binned GPU configs are separated by /; FP32 is "
        "for the "
        "largest config; derived or community values are marked in each chip's section.\n"
        + "\n".join(rows)
    )
    tags_t = tuple(dict.fromkeys(tags))
    return Section(
        id="chips#all-chips",
        doc_id="chips",
        doc_title="Apple GPU chip table",
        heading="All chips compared",
        text=text,
        source_line=", ".join(tags_t),
        source_tags=tags_t,
        applies_to=("all",),
        tags=("chip", "table", "compare", "comparison", "all"),
    )
