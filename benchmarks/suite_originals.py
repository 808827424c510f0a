"""The ``[original]`` table of every suite task, from the host launcher in its kernel.cu.

At each case the task lists (visible, held-out, bench) the launch of the task's kernel is
mlxport.translate.host.evaluate.evaluate_launch's, with the launcher's names bound from the task's
by HOST below. A pointer argument is the task tensor of its name; a scalar is the task name (or
product of dimensions) that equals what the host passes at every case.

    # print the tables
    python benchmarks/suite_originals.py [TASK ...]
    # append (or replace) them in task.toml
    python benchmarks/suite_originals.py --write [TASK ...]
    # exit 1 where a task.toml's table differs
    python benchmarks/suite_originals.py --verify [TASK ...]
    # mlxport.evals.check.check_task
    python benchmarks/suite_originals.py --check [--visible] [TASK ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlxport.expr import ExprError, evaluate  # noqa: E402
from mlxport.tasks import load_task, suite_names  # noqa: E402
from mlxport.translate.host.evaluate import evaluate_launch  # noqa: E402
from mlxport.verify.golden import STORAGE, shared_executor  # noqa: E402

# task -> the host launcher's parameters (and template parameters) as task names, read off kernel.cu
HOST: dict[str, dict[str, str]] = {
    # flash_attention_fwd<T, HEAD_DIM>(q, k, v, out, B, H, Tq, Tk, scale, causal, stream)
    "attention_fwd": {
        "B": "B",
        "H": "H",
        "Tq": "Tq",
        "Tk": "Tk",
        "HEAD_DIM": "D",
        "scale": "scale",
        "causal": "causal",
    },
    "cumsum": {"rows": "R", "cols": "C"},  # cumsum_rows<T>(x, out, rows, cols, stream)
    "gelu_tanh": {"n": "N"},  # gelu_tanh<T>(x, out, n, stream)
    # layernorm<T>(x, weight, bias, out, rows, dim, eps, stream)
    "layernorm": {"rows": "R", "dim": "D", "eps": "eps"},
    "matmul_tiled": {"M": "M", "N": "N", "K": "K"},  # matmul_tiled<T>(A, B, C, M, N, K, stream)
    "reduce_sum_atomic": {"n": "N"},  # reduce_sum_atomic<T>(x, out, n, stream)
    # rmsnorm<T>(x, weight, out, rows, dim, eps, stream)
    "rmsnorm": {"rows": "R", "dim": "D", "eps": "eps"},
    # rope<T>(x, out, batch, heads, seq_len, head_dim, offset, base, stream)
    "rope": {
        "batch": "B",
        "heads": "H",
        "seq_len": "T",
        "head_dim": "D",
        "offset": "offset",
        "base": "base",
    },
    # selective_scan_fwd<input_t, kNState>(u, delta, A, B, C, D_skip, y, batch, seqlen, dim,
    # delta_softplus, stream)
    "selective_scan": {
        "batch": "B",
        "seqlen": "L",
        "dim": "D",
        "kNState": "N",
        "delta_softplus": "delta_softplus",
    },
    "softmax_rows": {"rows": "R", "cols": "C"},  # softmax_rows<T>(x, out, rows, cols, stream)
    "transpose_tiled": {"rows": "M", "cols": "N"},  # transpose_tiled<T>(x, out, rows, cols, stream)
    "vector_add": {"n": "N"},  # vector_add(a, b, out, n, stream)
}

# what a table says beyond where it came from, found by reading kernel.cu
NOTES = {
    "attention_fwd": "kernel.cu instantiates flash_attention_fwd only at <__half, 64>, "
    "<__half, 128>, <__nv_bfloat16, 128> and <float, 64>; the held-out D = 32 and float32 at "
    "D = 128 or bfloat16 at D = 64 are not instantiated there, but the kernel template supports "
    "them (HEAD_DIM % 16 == 0) and runs at them here.",
    "rmsnorm": "kernel.cu's specialization rmsnorm<float> launches another kernel, "
    "rmsnorm_kernel_f4, for float32 at D % 4 == 0 and D <= 4096; the task runs rmsnorm_kernel as "
    "the generic rmsnorm<T> launches it, for every dtype (evaluate_launch takes the first launch "
    "site whose `if` holds, which is rmsnorm<T>'s).",
}

MARKER = "# [original]: written by benchmarks/suite_originals.py"


def table(name: str) -> dict[str, Any]:
    """The ``[original]`` table of task ``name``: args, results, launches."""
    task = load_task(name)
    executor = shared_executor()
    source = executor.source(task.folder / task.source)
    sig = source.kernels[task.kernel]
    element = [n for n, _ in sig.template_params if n in {p.base for p in sig.params if p.pointer}]
    cases = task.cases.visible + task.cases.heldout + task.cases.bench
    launches, per_case = [], []
    for case in cases:
        names = task.bindings(case, task.dtypes[0])
        host = {k: evaluate(v, names) for k, v in HOST[name].items()}
        got = evaluate_launch(
            source.preprocessed,
            task.kernel,
            host,
            types=dict.fromkeys(element, "float"),
            probe=lambda expr: executor.constant(source, task.kernel, expr),
        )
        template = []
        for (param, _), arg in zip(sig.template_params, got.template_args, strict=True):
            # a launcher specialized for one type, not the task's
            if param in element and arg in STORAGE:
                raise RuntimeError(
                    f"{name} at {task.case_label(case)}: the launch at kernel.cu:{got.line} "
                    f"fixes {param} = {arg}"
                )
            template.append("T" if param in element else arg)
        if len(got.args) != len(sig.params):
            raise RuntimeError(
                f"{name}: kernel.cu:{got.line} passes {len(got.args)} arguments to {task.kernel}"
            )
        launches.append(
            {
                "case": task.case_label(case),
                "grid": list(got.grid),
                "block": list(got.block),
                "shared_bytes": got.shared_bytes,
                "template": template,
            }
        )
        per_case.append(got.args)
    tensors, outputs = {t.name for t in task.inputs}, {t.name for t in task.outputs}
    args, results = {}, {}
    for i, p in enumerate(sig.params):
        if not p.pointer:
            args[p.name] = _scalar(
                task, p.name, per_case[0][i].text, [a[i].value for a in per_case], cases
            )
        elif p.name not in tensors | outputs:
            raise RuntimeError(
                f"{name}: pointer {p.name} of {task.kernel} is no input or output of the task"
            )
        else:
            args.update({p.name: p.name} if p.name in tensors else {})
            results.update({p.name: p.name} if p.name in outputs else {})
    if set(results) != outputs:
        raise RuntimeError(
            f"{name}: output(s) {sorted(outputs - set(results))} are no parameter of {task.kernel}"
        )
    return {"task": name, "args": args, "results": results, "launches": launches}


def _scalar(task, param: str, arg: str, values: list[Any], cases: list[dict[str, Any]]) -> str:
    """The task name equal to ``values``, what the host passes as ``param`` (written ``arg``), at
    every case: ``param`` itself, the task name HOST binds ``arg`` to, a param, a dimension, or a
    product of two or three dimensions."""
    dims = sorted(task.dims())
    names = [param, HOST[task.name].get(arg.strip(), ""), *(p.name for p in task.params), *dims]
    for expr in names + [" * ".join(c) for n in (2, 3) for c in itertools.combinations(dims, n)]:
        try:
            got = (
                [evaluate(expr, task.bindings(c, task.dtypes[0])) for c in cases] if expr else None
            )
        except ExprError:
            continue
        if got is not None and all(
            isinstance(v, bool) == isinstance(g, bool) and v == g
            for v, g in zip(values, got, strict=True)
        ):
            return expr
    raise RuntimeError(f"{task.name}: no task name equals {param} ({arg}) at every case: {values}")


def toml(t: dict[str, Any]) -> str:
    bound = ", ".join(k if k == v else f"{k} = {v}" for k, v in HOST[t["task"]].items())
    head = (
        f"{MARKER} from kernel.cu's host launcher, evaluated at each case "
        f"(host_eval.evaluate_launch) with its names bound as {bound}."
    )
    lines = [line for p in (head, NOTES.get(t["task"])) if p for line in _wrap(p)]
    lines += [
        "[original]",
        f"args = {_value(t['args'])}",
        f"results = {_value(t['results'])}",
        "launches = [",
    ]
    lines += [f"  {_value(launch)}," for launch in t["launches"]] + ["]"]
    return "\n".join(lines) + "\n"


def _wrap(paragraph: str, width: int = 108) -> list[str]:
    out, cur = [], "#"
    for w in paragraph.removeprefix("# ").split(" "):
        if len(cur) + 1 + len(w) > width and cur != "#":
            out, cur = [*out, cur], "#"
        cur += " " + w
    return [*out, cur]


def _value(v: Any) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v) if isinstance(v, int) else json.dumps(v)


def written(name: str, t: dict[str, Any]) -> str:
    """task.toml with ``t`` as its table, in place of the one this script appended before."""
    content = (load_task(name).folder / "task.toml").read_text()
    i = content.find("\n\n" + MARKER)
    return (content if i < 0 else content[: i + 1]) + "\n" + toml(t)


def check(names: list[str], visible_only: bool) -> int:
    from mlxport.evals.check import check_task

    bad = 0
    print(
        f"{'task':18} {'original':>9} {'worst max abs':>14} {'err norm':>9} {'s':>7}  failing rows"
    )
    for name in names:
        task, t0 = load_task(name), time.perf_counter()
        if visible_only:
            task.cases.heldout = []
        try:
            rows = check_task(task)
        except Exception as e:  # a golden that fails is a finding too
            print(f"{name:18} ERROR {type(e).__name__}: {e}")
            bad += 1
            continue
        failed = [r for r in rows if r.result.verdict != "pass"]
        orig = [r for r in rows if r.baseline.startswith("original")]
        worst = max(orig, key=lambda r: r.result.err_norm or 0).result
        bad += bool(failed)
        print(
            f"{name:18} {sum(r.result.verdict == 'pass' for r in orig):>4}/{len(orig):<4} "
            f"{max(r.result.max_abs or 0 for r in orig):14.3g} {worst.err_norm or 0:9.3g} "
            f"{time.perf_counter() - t0:7.1f}  "
            + "; ".join(f"{r.baseline} {r.case} {r.dtype} {r.result.verdict}" for r in failed),
            flush=True,
        )
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", nargs="*", help="suite tasks (default: all)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the tables into each task.toml")
    mode.add_argument(
        "--verify", action="store_true", help="exit 1 where a task.toml's table is not this one"
    )
    mode.add_argument(
        "--check", action="store_true", help="check_task: the reference against the original"
    )
    ap.add_argument("--visible", action="store_true", help="with --check: visible cases only")
    a = ap.parse_args(argv)
    names = a.tasks or suite_names()
    if a.check:
        return check(names, a.visible)
    stale = []
    for name in names:
        t = table(name)
        path = load_task(name).folder / "task.toml"
        new = written(name, t)
        if a.write and path.read_text() != new:
            path.write_text(new)
            print(f"wrote [original] of {name} ({len(t['launches'])} launches)")
        elif a.verify and path.read_text() != new:
            stale.append(name)
            print(
                f"{name}: task.toml's [original] is not the one kernel.cu gives (run with --write)"
            )
        elif not (a.write or a.verify):
            print(f"## {name}\n{toml(t)}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
