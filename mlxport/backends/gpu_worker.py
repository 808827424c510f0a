"""What the metal and cuda backends' worker process executes (see backends/gpu.py)."""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np

from mlxport.backends import mlx_kernel, timer
from mlxport.spec import Datasheet, KernelCandidate


def handle(
    header: dict[str, Any], arrays: list[np.ndarray]
) -> tuple[dict[str, Any], list[np.ndarray]]:
    """The worker's entry point (see backends/worker.py): dispatch on ``op``."""
    return OPS[header["op"]](header, arrays)


def device_info(payload: dict[str, Any], arrays=None) -> tuple[dict[str, Any], list]:
    """MLX's description of the GPU, the timer's basis, and the bandwidth roofline fractions are of.
    ``payload["datasheet"]``: this machine's published figures, if the caller knows them."""
    from mlxport.backends.calibration import device_name

    info = dict(mx.device_info(mx.gpu)) if hasattr(mx, "device_info") else {}
    info = {k: (v if isinstance(v, str | int | float | bool) else str(v)) for k, v in info.items()}
    info["device_name"] = device_name(payload["backend"])
    info["mlx_version"] = mx.__version__
    # as the timing worker runs (gpu.TIMING_ENV)
    info["timing_basis"] = timer.basis(calls_in_order=True)
    datasheet = payload.get("datasheet")
    info.update(
        _bandwidth(info["device_name"], Datasheet.model_validate(datasheet) if datasheet else None)
    )
    return info, []


def _bandwidth(device_name: str, datasheet: Datasheet | None) -> dict[str, Any]:
    """The bandwidth benchmarks report a fraction of, and what it is: this device's calibration,
    else its datasheet figure, else nothing (no fraction rather than a wrong one)."""
    from mlxport.backends.calibration import load

    cal = load(device_name)
    if cal:
        return {
            "bandwidth_gbs": cal["copy_gbs"],
            "bandwidth_basis": (
                f"copy bandwidth measured by `mlxport doctor --calibrate` ({cal.get('date')})"
            ),
        }
    if datasheet is None:
        return {}
    return {
        "bandwidth_gbs": datasheet.memory_bandwidth_gbs,
        "bandwidth_basis": (
            f"{datasheet.name} datasheet bandwidth "
            "(knowledge base; run `mlxport doctor --calibrate`)"
        ),
    }


def _example_inputs(args: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, v in args.items():
        if isinstance(v, dict):
            dtype = mlx_kernel.MX_DTYPES[v["dtype"]]
            out[name] = mx.ones(v["shape"], dtype=dtype)
        else:
            out[name] = v
    return out


def compile(payload: dict[str, Any], arrays=None) -> tuple[dict[str, Any], list]:
    """Compile by launching once on placeholder inputs of the right signature (MLX compiles at
    the first evaluation); errors come back as diagnostics on body and header lines."""
    candidate = KernelCandidate.model_validate(payload["candidate"])
    inputs = _example_inputs(payload["args"])
    try:
        mx.eval(*mlx_kernel.launch(candidate, inputs))
    except Exception as e:
        diags = mlx_kernel.compile_diagnostics(candidate, inputs, str(e))
        return {"ok": False, "diagnostics": [d.model_dump() for d in diags]}, []
    return {"ok": True, "diagnostics": []}, []


def _inputs(specs: list[dict[str, Any]], arrays: list[np.ndarray]) -> dict[str, Any]:
    out = {}
    for spec in specs:
        if "array" not in spec:
            out[spec["name"]] = spec["value"]
            continue
        a = mx.array(arrays[spec["array"]])
        out[spec["name"]] = a.view(mx.bfloat16) if spec["dtype"] == "bfloat16" else a
    return out


def call_op(payload: dict[str, Any], arrays: list[np.ndarray]) -> tuple[dict[str, Any], list]:
    """A port's written kernel.py called as a user calls it, its kernel on this GPU."""
    import tempfile
    from pathlib import Path

    from mlxport.backends import op_call

    folder = Path(tempfile.mkdtemp(prefix="op-"))  # in the worker's own temporary folder
    for name, text in payload["files"].items():
        if name in op_call.OP_TEXT:
            (folder / name).write_text(text)
    result = op_call.call(folder, payload["backend"], arrays, payload["dtypes"], payload["params"])
    return ({"error": result.error}, []) if not result.ok else ({}, result.outputs)


def run(
    payload: dict[str, Any], arrays: list[np.ndarray]
) -> tuple[dict[str, Any], list[np.ndarray]]:
    """One launch per input set, all in one evaluation. Several sets make independent calls, which
    MLX may run at once on the device: its CUDA graphs order kernels only by the buffers they
    share."""
    candidate = KernelCandidate.model_validate(payload["candidate"])
    try:
        poison = payload.get("poison", "nan")
        given = [_inputs(specs, arrays) for specs in payload["input_sets"]]
        launches = [mlx_kernel.launch(candidate, inputs, poison=poison) for inputs in given]
        mx.eval(*[o for outs in launches for o in outs])
    except Exception as e:
        return {"error": f"{type(e).__name__}: {str(e)[:800]}"}, []
    if written := _written_inputs(payload["input_sets"], arrays, given):
        return {
            "error": f"the kernel wrote into its input {written} (a const pointer cast away, "
            "say); a kernel may only write its outputs: the caller's arrays must be left as they "
            "were"
        }, []
    sets, data = [], []
    for outs in launches:
        dtypes = [mlx_kernel.DTYPE_NAMES[o.dtype] for o in outs]
        # launch_kwargs poisons with NaN only when there is no init_value and every output is a
        # float
        poisoned = (
            poison == "nan"
            and candidate.init_value is None
            and all(d.startswith(("float", "bfloat")) for d in dtypes)
        )
        masks = (
            [np.isnan(np.array(o.astype(mx.float32))).astype(np.uint8) for o in outs]
            if poisoned
            else []
        )
        sets.append({"dtypes": dtypes, "unwritten": [poisoned] * len(outs)})
        data += [np.array(o.view(mx.uint16) if o.dtype == mx.bfloat16 else o) for o in outs] + masks
    return {"sets": sets}, data


def _written_inputs(
    input_sets: list[list[dict[str, Any]]], arrays: list[np.ndarray], given: list[dict[str, Any]]
) -> str | None:
    """The name of an input array the launches changed, if any."""
    for specs, inputs in zip(input_sets, given, strict=True):
        for spec in specs:
            if (
                "array" in spec
                and not mx.array_equal(
                    inputs[spec["name"]], _inputs([spec], arrays)[spec["name"]], equal_nan=True
                ).item()
            ):
                return spec["name"]
    return None


# The timing worker's inputs for its last (task, case, dtype, seed), with the reference's outputs:
# a search times many candidates on the same inputs, and drawing them (seconds at the bench sizes)
# happens in ``prepare``, outside the timing lock that other processes wait on. Their fingerprint
# is checked after every timing: a candidate that writes into its inputs must not leave them changed
# for the next one.
_TIMING_INPUTS: dict[str, tuple[list[dict[str, Any]], list | None, list[int]]] = {}


def _fingerprint(sets: list[dict[str, Any]]) -> list[int]:
    """A checksum of every input array's bytes, each byte weighted by its position (wrapping
    32-bit integer arithmetic, so the order of the sum does not matter)."""
    out = []
    for s in sets:
        for v in s.values():
            if isinstance(v, mx.array):
                b = mx.flatten(v).view(mx.uint8).astype(mx.uint32)
                out.append(mx.sum(b * (mx.arange(b.size, dtype=mx.uint32) % 251 + 1)))
    mx.eval(out)
    return [int(c.item()) for c in out]


def _timing_inputs(payload: dict[str, Any]) -> tuple[list[dict[str, Any]], list | None, list[int]]:
    import json

    from mlxport.tasks import call, load_task, make_inputs

    task, case = load_task(payload["task_dir"]), payload["case"]
    # keyed by the task's contents too: an edited task draws afresh
    key = json.dumps(
        [task.model_dump_json(), case, payload["dtype"], payload["seed"]], sort_keys=True
    )
    if key not in _TIMING_INPUTS:
        _TIMING_INPUTS.clear()
        sets = [make_inputs(task, case, payload["dtype"], payload["seed"] + i) for i in range(3)]
        # the reference runs here too: a broken task fails loudly
        refs = (
            [call(task.reference, task, inputs, case) for inputs in sets]
            if task.reference is not None
            else None
        )
        mx.eval([v for s in sets for v in s.values() if isinstance(v, mx.array)], refs or [])
        _TIMING_INPUTS[key] = (sets, refs, _fingerprint(sets))
    return _TIMING_INPUTS[key]


def prepare(payload: dict[str, Any], arrays=None) -> tuple[dict[str, Any], list]:
    """Before a timing, outside the lock: the inputs drawn and, with ``args``, the candidate
    compiled (its failure is left for the measurement to report)."""
    _timing_inputs(payload)
    return compile(payload) if "args" in payload else ({"ok": True, "diagnostics": []}, [])


def measure(payload: dict[str, Any], arrays=None) -> tuple[dict[str, Any], list]:
    """Time the candidate and every baseline of the task on the same inputs, interleaved in
    rounds so that drift affects all alike."""
    from mlxport.tasks import baseline, load_task

    task = load_task(payload["task_dir"])
    candidate = KernelCandidate.model_validate(payload["candidate"])
    case, dtype = payload["case"], payload["dtype"]
    sets, refs, fingerprint = _timing_inputs(payload)
    params = task.param_values(case)

    # Scalar params become kernel inputs once, as the written kernel.py makes them: what is timed
    # is what ships.
    fns = {"candidate": mlx_kernel.caller(candidate, {**sets[0], **params})}
    if task.baselines is not None and payload.get("baselines", True):
        fns["native"] = baseline(task, task.baselines.native, params)
        fns["naive"] = baseline(task, task.baselines.naive, params)
    samples = timer.samples(fns, sets, warmup=payload["warmup"], iters=payload["iters"])
    reply: dict[str, Any] = {"samples": samples}
    if refs is not None:
        reply["timed_outputs"] = timed_outputs(task, candidate, fns["candidate"], sets, refs, dtype)
    if _fingerprint(sets) != fingerprint:
        _TIMING_INPUTS.clear()  # the next timing draws them afresh
        reply["wrote_inputs"] = True
    return reply, []


def timed_outputs(
    task, candidate: KernelCandidate, fn, sets: list[dict[str, Any]], refs: list, dtype: str
) -> str | None:
    """What is wrong with the candidate's outputs as the timed calls make them (output memory
    reused from the previous call, nothing poisoned), against the reference's outputs ``refs`` on
    each input set; None when right. A kernel that trusts what a reused output buffer still holds
    is right when checked on poisoned outputs and fast while timed."""
    tol = task.tolerance[dtype]
    order = [
        candidate.output_names.index(t.name) if t.name in candidate.output_names else k
        for k, t in enumerate(task.outputs)
    ]
    for k, inputs in enumerate(sets * 2):  # twice round: every call follows another's outputs
        outs = mlx_kernel.as_list(fn(inputs))
        for spec, idx, ref in zip(task.outputs, order, refs[k % len(sets)], strict=True):
            got, want = outs[idx].astype(mx.float32), ref.astype(mx.float32)
            bad = mx.logical_not(
                mx.isclose(got, want, rtol=4 * tol.rtol, atol=4 * tol.atol, equal_nan=True)
            )
            share = mx.mean(bad.astype(mx.float32)).item()
            if share > 0.01:
                return (
                    f"{share:.1%} of {spec.name} is wrong in the calls made as they are timed "
                    f"(input set {k % len(sets)}, output memory reused, nothing poisoned)"
                )
    return None


def calibrate(payload: dict[str, Any], arrays=None) -> tuple[dict[str, Any], list]:
    from mlxport.backends.calibration import measure as calibration

    return calibration(payload["backend"]), []


def copy_seconds(payload: dict[str, Any], arrays=None) -> tuple[dict[str, Any], list]:
    from mlxport.backends.calibration import copy_seconds as seconds

    return {"seconds": seconds(payload["nbytes"])}, []


OPS = {
    "device_info": device_info,
    "compile": compile,
    "run": run,
    "call_op": call_op,
    "prepare": prepare,
    "measure": measure,
    "calibrate": calibrate,
    "copy_seconds": copy_seconds,
}
