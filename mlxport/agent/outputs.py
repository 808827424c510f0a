"""What a port leaves behind in ``<out>/<task>/``: an importable op, its parity test, a report,
the run record, every candidate tried and the transcript."""

from __future__ import annotations

import json
import platform
import shutil
from importlib.metadata import version
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from mlxport.agent.report_html import render_port_html
from mlxport.agent.state import State
from mlxport.redaction import write_text
from mlxport.spec import BenchmarkReport, CorrectnessReport, KernelCandidate, KernelTask
from mlxport.spec.results import MODE_LABELS
from mlxport.tools.session import Record
from mlxport.verify.correctness import output_order
from mlxport.verify.reverify import verdict_label

KERNEL_PY = '''"""{task}: {description}

Ported from CUDA `{kernel}` by mlxport ({model}); {label}
({verification}). `backend` says which path runs: metal, cuda, sim (MLXPORT_KERNEL_BACKEND=sim: this
file's kernel on mlxport's Metal simulator, slow, for checking the artifact where no GPU is) or
reference (the reference implementation, with a warning once, where the kernel cannot run).
"""

import importlib.util
import os
import warnings
from pathlib import Path

import mlx.core as mx
from mlx.core import {dtype_imports}

LANGUAGE = {language!r}
VERIFIED_DTYPES = ({dtypes},)

SOURCE = {source}

HEADER = {header}

_kernels = {{}}


def ceildiv(a, b):
    return -(-a // b)


def _reference():
{reference_body}


_scalars = {{}}


def _scalar(value):
    """A scalar input, made once per value. Metal takes a 0-d array. On CUDA, MLX keeps arrays of
    8 bytes or less in host-written managed memory, where every block's read of the scalar
    crosses the bus; a 16-element array the GPU writes lives in device memory (the kernel reads
    element 0). Keyed by type and repr: 1 == 1.0 and 0.0 == -0.0, while NaN != NaN."""
    if not isinstance(value, (bool, int, float)):
        return value
    key = (type(value), repr(value))
    if key not in _scalars:
        if len(_scalars) >= 256:  # a param that changes every call (a decode offset) must not grow this
            _scalars.clear()
        scalar = mx.array(value)
        _scalars[key] = scalar if LANGUAGE == "msl" else mx.full((16,), value, dtype=scalar.dtype)
    return _scalars[key]


def _available():
    return mx.metal.is_available() if LANGUAGE == "msl" else hasattr(mx, "cuda") and mx.cuda.is_available()


def _backend():
    if os.environ.get("MLXPORT_KERNEL_BACKEND") == "sim" and LANGUAGE == "msl":
        return "sim"
    if _available():
        return "metal" if LANGUAGE == "msl" else "cuda"
    return "reference"


backend = _backend()
_warned = []


def _fall_back(why):
    if not _warned:
        _warned.append(why)
        warnings.warn(f"{func} runs its reference implementation, not the ported kernel: {{why}}", RuntimeWarning,
                      stacklevel=3)
    return _reference()


def _simulate(inputs, args):
    """This file's kernel on mlxport's Metal simulator (needs mlxport installed)."""
    from mlxport.backends import get_backend
    from mlxport.spec import KernelCandidate

    verified = KernelCandidate.from_toml(Path(__file__).with_name("candidate.toml"))
    candidate = verified.model_copy(update={{"source": SOURCE, "header": HEADER}})
    run = get_backend("sim").run(candidate, inputs)
    if not run.ok:
        raise RuntimeError(f"the simulator could not run {func}: {{run.error}}")
    return [mx.array(o).astype(d) for o, d in zip(run.outputs, args["output_dtypes"])]


def _get_kernel(shared_memory=0):
    # cuda_kernel takes its dynamic shared memory at construction: one kernel object per size.
    if shared_memory not in _kernels:
        make = mx.fast.metal_kernel if LANGUAGE == "msl" else mx.fast.cuda_kernel
        extra = {{"atomic_outputs": {atomic_outputs!r}}} if LANGUAGE == "msl" else {{"shared_memory": shared_memory}}
        _kernels[shared_memory] = make(name={name!r}, input_names={input_names!r}, output_names={output_names!r},
                                       source=SOURCE, header=HEADER,
                                       ensure_row_contiguous={ensure_row_contiguous!r}, **extra)
    return _kernels[shared_memory]


def launch_args({signature}):
    """Grid (in threads), threadgroup, template values and output shapes for these inputs."""
{template_lines}
    return dict(
        template=[{template_items}] or None,
        grid=({grid}),
        threadgroup=({threadgroup}),
        output_shapes=[{output_shapes}],
        output_dtypes=[{output_dtypes}],
        init_value={init_value!r},
        shared_memory={shared_memory},
    )


def {func}({signature}):
    """{description}"""
    if backend == "reference":
        return _fall_back(f"no {{'Metal' if LANGUAGE == 'msl' else 'CUDA'}} GPU here")({call_args})
    if {first_input}.dtype not in VERIFIED_DTYPES:
        return _fall_back(f"{{{first_input}.dtype}} was not verified")({call_args})
    args = launch_args({call_args})
    if backend == "sim":
        outs = _simulate({sim_inputs}, args)
    else:
        outs = _get_kernel(args.pop("shared_memory"))(inputs=[{input_names_joined}], **args)
{inout_lines}    return {return_expr}
'''

_REFERENCE_BODY = """    path = Path(__file__).with_name("reference.py")
    spec = importlib.util.spec_from_file_location("_{task}_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.{fn}"""
_NO_REFERENCE = """    raise RuntimeError("{task} has no MLX reference to fall back to and no GPU runs the kernel here "
                       "(it was checked against the original CUDA kernel): run it where Metal or CUDA is")"""

TEST_PY = '''"""Parity test of kernel.py against the reference (written by mlxport).

Where Metal (or CUDA) is present this runs the kernel; elsewhere kernel.py falls back to the
reference (and says so), so the simulator test runs kernel.py's own path with
MLXPORT_KERNEL_BACKEND=sim on mlxport's Metal simulator.
"""

import importlib.util
import math
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

HERE = Path(__file__).parent
CASES = {cases!r}
DTYPES = {dtypes!r}
TOLERANCE = {tolerance!r}


def _load(name):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{{name}}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_reference(case, dtype):
    from mlxport.tasks import load_task, make_inputs
    from mlxport.verify.golden import golden

    kernel = _load("kernel")
    if not kernel._available() and not (HERE / "reference.py").is_file():
        pytest.skip("no GPU here and no MLX reference to fall back to: the simulator test checks the kernel")
    task = load_task(HERE / "task")
    inputs = make_inputs(task, CASES[case], dtype, seed=1234 + case)
    params = task.param_values(CASES[case])
    out = kernel.{func}(*[inputs[t.name] for t in task.inputs], **params)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    refs = golden(task, inputs, CASES[case])
    for o, r in zip(outs, refs):
        o = np.array(o.astype(mx.float32))
        np.testing.assert_allclose(o, r, atol=TOLERANCE[dtype]["atol"], rtol=TOLERANCE[dtype]["rtol"])


def test_this_files_kernel_on_the_simulator(monkeypatch):
    """kernel.py's own call path with MLXPORT_KERNEL_BACKEND=sim: its source, launch arguments and
    output handling run on mlxport's Metal simulator, where no GPU is needed (the smallest case:
    every case and the held-out ones were verified before this file was written)."""
    monkeypatch.setenv("MLXPORT_KERNEL_BACKEND", "sim")
    kernel = _load("kernel")
    if kernel.LANGUAGE != "msl":
        pytest.skip("the simulator runs Metal kernels only")
    assert kernel.backend == "sim"
    from mlxport.tasks import load_task, make_inputs
    from mlxport.verify.golden import golden

    task = load_task(HERE / "task")
    dtype = DTYPES[0]
    case = min(range(len(CASES)), key=lambda i: max(math.prod(s) for s in task.shapes(CASES[i], dtype).values()))
    inputs = make_inputs(task, CASES[case], dtype, seed=4321 + case)
    out = kernel.{func}(*[inputs[t.name] for t in task.inputs], **task.param_values(CASES[case]))
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for o, r in zip(outs, golden(task, inputs, CASES[case])):
        np.testing.assert_allclose(np.array(o.astype(mx.float32)), r, atol=TOLERANCE[dtype]["atol"],
                                   rtol=TOLERANCE[dtype]["rtol"])


def test_kernel_says_which_path_runs():
    kernel = _load("kernel")
    assert kernel.backend in ("metal", "cuda", "reference")
    if kernel.backend == "reference" and (HERE / "reference.py").is_file():
        from mlxport.tasks import load_task, make_inputs

        task = load_task(HERE / "task")
        inputs = make_inputs(task, CASES[0], DTYPES[0], seed=1)
        with pytest.warns(RuntimeWarning, match="runs its reference implementation"):
            kernel.{func}(*[inputs[t.name] for t in task.inputs], **task.param_values(CASES[0]))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_launch_args_match_the_verified_launch(case):
    """kernel.py computes grid, threadgroup and templates in plain Python: check it against
    the launch mlxport verified, for every case and dtype."""
    from mlxport.spec import KernelCandidate
    from mlxport.tasks import arg_infos, load_task, make_inputs
    from mlxport.verify.correctness import kernel_args

    kernel = _load("kernel")
    task = load_task(HERE / "task")
    candidate = KernelCandidate.from_toml(HERE / "candidate.toml")
    for dtype in DTYPES:
        inputs = make_inputs(task, CASES[case], dtype, seed=5)
        expected = candidate.launch(arg_infos(task, inputs, CASES[case]))
        args = kernel_args(task, candidate, inputs, CASES[case])
        got = kernel.launch_args(**{{n: args[n] for n in [t.name for t in task.inputs] + list(task.param_values(CASES[case]))}})
        assert tuple(got["grid"]) == expected.grid and tuple(got["threadgroup"]) == expected.threadgroup
        assert got["shared_memory"] == expected.shared_memory
        assert [tuple(s) for s in got["output_shapes"]] == expected.output_shapes
        template = [(k, str(v).split(".")[-1] if isinstance(v, mx.Dtype) else v) for k, v in got["template"] or []]
        assert template == expected.template
'''


def write_outputs(
    out: Path, task: KernelTask, state: State, config: dict[str, Any], session_id: str
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    records = {k: Record.model_validate(v) for k, v in state.records.items()}
    final = state.final or {}
    cand_dir = out / "candidates"
    cand_dir.mkdir(exist_ok=True)
    for cid, r in records.items():
        write_text(cand_dir / f"{cid}.toml", r.candidate.to_toml())
    _write_transcript(out / "transcript.jsonl", state.messages)
    best = records.get(final.get("candidate_id") or "")
    if best is not None:
        _write_op(out, task, best.candidate, config, final)
    run = run_record(task, state, config, session_id, records)
    write_text(out / "report.md", report_md(task, run, best, final))
    write_text(
        out / "report.html", render_port_html(task, run, records, final, _ceilings(final, config))
    )
    write_text(
        out / "run.json", json.dumps(run, indent=2, default=str)
    )  # last: it marks the port done
    return run


def _ceilings(final: dict, config: dict[str, Any]):
    """The device figures the roofline is drawn under: this machine's GPU where the port was timed,
    else the chip the simulator's estimates are for."""
    from mlxport.knowledge import hardware_profile, local_datasheet

    if ((final.get("benchmark") or {}).get("candidate")) is not None:
        return local_datasheet()
    try:
        return hardware_profile(config.get("chip") or "M3 Max").datasheet()
    except ValueError:
        return None


def _write_transcript(path: Path, messages: list[BaseMessage]) -> None:
    write_text(
        path,
        "".join(
            json.dumps(
                {
                    "type": m.type,
                    "content": m.content,
                    "tool_calls": getattr(m, "tool_calls", None) or None,
                    "tool_call_id": getattr(m, "tool_call_id", None),
                },
                default=str,
            )
            + "\n"
            for m in messages
        ),
    )


def _write_op(
    out: Path, task: KernelTask, c: KernelCandidate, config: dict[str, Any], final: dict
) -> None:
    task_copy = out / "task"
    if task_copy.exists():
        shutil.rmtree(task_copy)
    shutil.copytree(task.folder, task_copy, ignore=shutil.ignore_patterns("__pycache__"))
    if (task.folder / "reference.py").is_file():
        shutil.copy(task.folder / "reference.py", out / "reference.py")
    write_text(out / "candidate.toml", c.to_toml())
    inputs = {t.name for t in task.inputs}
    names = [t.name for t in task.inputs] + [p.name for p in task.params]
    params = {p.name: p.default for p in task.params}
    signature = ", ".join(
        [t.name for t in task.inputs]
        + (["*"] if task.params else [])
        + [f"{p}={params[p]!r}" for p in params]
    )
    call_args = ", ".join([t.name for t in task.inputs] + [f"{p}={p}" for p in params])
    verification = final.get("verification") or {}
    text = KERNEL_PY.format(
        task=task.name,
        description=task.description.replace("\\", "/").replace('"', "'"),
        kernel=task.kernel,
        model=config.get("model"),
        label=verdict_label(final),
        verification=f"{len(verification.get('cases', []))} cases incl. held-out, seeds {verification.get('seeds')}",
        dtype_imports="bfloat16, bool_, float16, float32, int8, int16, int32, int64, uint8, uint16, uint32, uint64",
        language=c.language,
        dtypes=", ".join(task.dtypes),
        source=_text_literal(c.source),
        header=_text_literal(c.header),
        name=c.name,
        input_names=c.input_names,
        output_names=c.output_names,
        atomic_outputs=c.atomic_outputs,
        ensure_row_contiguous=c.ensure_row_contiguous,
        func=task.name,
        signature=signature,
        first_input=task.inputs[0].name,
        call_args=call_args,
        input_names_joined=", ".join(
            n if n in inputs else f"_scalar({n})" for n in c.input_names if n in names
        ),
        sim_inputs="{" + ", ".join(f"{n!r}: {n}" for n in c.input_names if n in names) + "}",
        template_lines="\n".join(f"    {k} = {_py(v)}" for k, v in c.template.items())
        or "    pass",
        template_items=", ".join(f"({k!r}, {k})" for k in c.template),
        grid=", ".join(_py(g) for g in c.grid),
        threadgroup=", ".join(_py(t) for t in c.threadgroup),
        output_shapes=", ".join(_shape_py(s) for s in c.output_shapes),
        output_dtypes=", ".join(_py(d) for d in c.output_dtypes),
        init_value=c.init_value,
        shared_memory=_py(c.shared_memory),
        return_expr=", ".join(f"outs[{i}]" for i in output_order(task, c)),
        reference_body=_REFERENCE_BODY.format(task=task.name, fn=task.reference.split(":")[1])
        if task.reference
        else _NO_REFERENCE.format(task=task.name),
        inout_lines="".join(
            f"    outs[{c.output_names.index(o)}] = mx.where(mx.isnan(outs[{c.output_names.index(o)}]), "
            f"{i}.reshape(outs[{c.output_names.index(o)}].shape), outs[{c.output_names.index(o)}])"
            f"  # what the kernel did not write is the input's\n"
            for o, i in c.inout.items()
        ),
    )
    write_text(out / "kernel.py", text)
    tol = {d: {"atol": t.atol, "rtol": t.rtol} for d, t in task.tolerance.items()}
    write_text(
        out / "test_kernel.py",
        TEST_PY.format(cases=task.all_cases(), dtypes=task.dtypes, tolerance=tol, func=task.name),
    )


def _text_literal(text: str) -> str:
    """A triple-quoted literal that reads like the kernel source it holds."""
    if not text:
        return '""'
    if text.endswith('"'):
        text += "\n"
    return '"""' + text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '"""'


def _py(expr: str | int) -> str:
    """Candidate expressions are a checked subset of Python over mx arrays, so they are emitted
    as they are; dtype names resolve through the mlx.core imports at the top of kernel.py."""
    return str(expr)


def _shape_py(shape: str | list) -> str:
    return _py(shape) if isinstance(shape, str) else "(" + ", ".join(_py(d) for d in shape) + ",)"


def run_record(
    task: KernelTask,
    state: State,
    config: dict[str, Any],
    session_id: str,
    records: dict[str, Record],
) -> dict[str, Any]:
    from mlxport.agent.providers import cost

    usage = state.usage
    reason = usage.get("reason", {})
    final = state.final or {}
    bench = final.get("benchmark") or {}
    history = state.best_history
    return {
        "session": session_id,
        "task": task.name,
        "model": config.get("model"),
        "config": config,
        "non_llm_baseline": config.get("model") == "rules",
        "stop_reason": state.stop_reason,
        "iterations": state.iterations,
        "wall_seconds": round(state.elapsed, 3),
        "tokens": {
            "input": reason.get("input_tokens", 0),
            "output": reason.get("output_tokens", 0),
        },
        "usage_by_node": usage,
        "cost_usd": round(
            cost(
                config.get("model", ""),
                reason.get("input_tokens", 0),
                reason.get("output_tokens", 0),
                config.get("prices"),
            ),
            6,
        ),
        "candidates": len(records),
        "compile_failures": sum(
            r.compile is not None and not r.compile.ok for r in records.values()
        ),
        "tool_errors": state.tool_errors,
        "result": {
            "candidate_id": final.get("candidate_id"),
            "verified": bool(final.get("verified")),
            "backend": final.get("backend"),
            "speedups": bench.get("speedups", {}),
            "timed": bench.get("candidate") is not None,
            "estimate": bench.get("estimate", ""),
            "golden": (final.get("verification") or {}).get("golden", ""),
            "timed_size": final.get("timed_size"),
            "label": verdict_label(final),
            "why_not": None if final.get("verified") else why_not(state, records),
        },
        "rejected_in_final_verification": [r["candidate_id"] for r in final.get("rejected", [])],
        "iterations_to_best": history[-1]["iteration"] if history else None,
        "best_history": history,
        "plan": state.plan.get("nodes", []),
        "cycles": state.cycles,
        "seed": config.get("seed"),
        "versions": {p: _version(p) for p in ("mlxport", "mlx", "langgraph", "langchain-core")},
        "host": {"platform": platform.platform(), "python": platform.python_version()},
    }


def _version(pkg: str) -> str | None:
    try:
        return version(pkg)
    except Exception:
        return None


def why_not(state: State, records: dict[str, Record]) -> str:
    """One sentence on why no kernel was verified: the first check a candidate failed, with its case
    and first mismatch, or the construct the port stopped at."""
    for r in (state.final or {}).get("rejected", []):
        if r.get("reason"):
            return f"candidate {r['candidate_id']}: {r['reason']}"
        report = CorrectnessReport.model_validate(r["report"])
        bad = next(c for c in report.cases if c.verdict != "pass")
        return (
            f"candidate {r['candidate_id']} failed final verification at {bad.label} {bad.dtype}: "
            + (bad.error or _mismatch(bad))
        )
    for rec in sorted(records.values(), key=lambda x: -x.iteration):
        if rec.correctness is not None and not rec.correctness.ok:
            bad = next(c for c in rec.correctness.cases if c.verdict != "pass")
            return f"candidate {rec.candidate.id} is wrong at {bad.label} {bad.dtype}: " + (
                bad.error or _mismatch(bad)
            )
        if rec.compile is not None and not rec.compile.ok:
            first = rec.compile.diagnostics[0] if rec.compile.diagnostics else None
            where = f" ({first.where} line {first.line})" if first and first.line else ""
            return f"candidate {rec.candidate.id} does not compile{where}: {first.message if first else 'unknown'}"
    summary = (state.finish or {}).get("summary")
    return summary or f"the port stopped ({state.stop_reason}) before any candidate was correct"


def _mismatch(c) -> str:
    at = (
        f"; first at {c.first_mismatch}: got {c.got:.6g}, expected {c.expected:.6g}"
        if c.first_mismatch is not None and c.got is not None
        else ""
    )
    return f"{c.pattern}{at}"


def report_md(task: KernelTask, run: dict[str, Any], best: Record | None, final: dict) -> str:
    lines = [
        f"# {task.name}: port report",
        "",
        f"- model: `{run['model']}`"
        + (" (rule-based translator: a non-LLM baseline)" if run["non_llm_baseline"] else ""),
        f"- stop reason: {run['stop_reason']}; iterations {run['iterations']}; candidates {run['candidates']}",
        f"- tokens in/out: {run['tokens']['input']}/{run['tokens']['output']}; cost ${run['cost_usd']:.4f}",
        f"- wall time: {run['wall_seconds']:.1f} s",
        "",
    ]
    notes = task.folder / "NOTES.md" if task.folder else None
    if notes is not None and notes.is_file():
        lines += ["## Making the task", "", *notes.read_text().splitlines()[2:], ""]
    if best is None:
        lines += ["**No candidate passed verification.** " + run["result"]["why_not"], ""]
        for r in final.get("rejected", [])[1:]:
            lines.append(f"- {r['candidate_id']} was rejected too")
        return "\n".join(lines) + "\n"
    report = CorrectnessReport.model_validate(final["verification"])
    lines += [
        f"Result: candidate `{best.candidate.id}`, **{verdict_label(final)}**, against "
        f"{report.golden or 'the reference'}.",
        "",
        "## Correctness",
        "",
    ]
    for seed in dict.fromkeys(c.seed for c in report.cases):
        lines += [
            f"Seed {seed}:" if seed is not None else "All seeds:",
            "",
            "| case | kind | dtype | verdict | max abs err | err norm |",
            "|---|---|---|---|---|---|",
        ]
        for c in (c for c in report.cases if c.seed == seed):
            how = MODE_LABELS[c.mode]
            kind = ("held-out" if c.heldout else "visible") + (f", {how}" if how else "")
            verdict = c.verdict if c.verdict == "pass" else f"{c.verdict}: {c.error or c.pattern}"
            err = f"{c.max_abs:.3g} | {c.err_norm:.3g}" if c.max_abs is not None else "- | -"
            lines.append(f"| {c.case} | {kind} | {c.dtype} | {verdict} | {err} |")
        lines.append("")
    lines += ["", "## Speed", ""]
    bench = BenchmarkReport.model_validate(final["benchmark"])
    if bench.candidate is None:
        lines.append(f"Not timed ({bench.backend} backend). {bench.estimate}")
    else:
        lines += [
            f"Device: {bench.device}; case {bench.case}, {bench.dtype}"
            + (f"; times are {bench.timing_basis}." if bench.timing_basis else "."),
            "",
            "| kernel | median (us) | spread | GB/s | speedup |",
            "|---|---|---|---|---|",
            f"| candidate | {bench.candidate.median_us:.1f} | {bench.candidate.spread:.0%} | "
            f"{bench.candidate.gbs or 0:.0f} | 1.00x |",
        ]
        for b in bench.baselines:
            lines.append(
                f"| {b.name} | {b.median_us:.1f} | {b.spread:.0%} | {b.gbs or 0:.0f} | "
                f"{bench.speedups[b.name]:.2f}x |"
            )
        if bench.candidate.roofline_fraction:
            lines += [
                "",
                f"The candidate moves {bench.candidate.roofline_fraction:.0%} of the "
                f"{bench.bandwidth_basis or 'peak bandwidth'}.",
            ]
        if bench.flags:
            lines += [""] + [f"- {f}" for f in bench.flags]
    lines += [
        "",
        "## Kernel",
        "",
        "```metal" if best.candidate.language == "msl" else "```cuda",
        best.candidate.source.strip(),
        "```",
        "",
    ]
    return "\n".join(lines)
