"""An MLX op that mlxport ported from CUDA and verified: call it as the function op.toml names
(``from kernel import NAME``), with its inputs as MLX arrays and its params as keywords.

Everything specific to the port sits beside this file: candidate.toml (the kernel and its launch
expressions), op.toml (the op's contract: inputs and the sizes their shapes give, params,
outputs, the dtypes verified), mlxport_expr.py (the expression evaluator mlxport verified the
launch with) and, where the port has one, reference.py.

Sizes come from the inputs' shapes; a size no shape gives is a required keyword. Inputs of a
shape or dtype the port was not verified at are refused in one sentence. ``backend`` says which
path runs: ``metal`` or ``cuda`` (the kernel through ``mx.fast``), ``sim`` (with
MLXPORT_KERNEL_BACKEND=sim: the kernel on mlxport's Metal simulator, slow, for checking where no
GPU is; needs mlxport), ``reference`` (reference.py, where the kernel cannot run here; a warning
says so once) or ``none`` (nothing can run it here: a call says what to do).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import tomllib
import warnings
from pathlib import Path

import mlx.core as mx

HERE = Path(__file__).resolve().parent
OP = tomllib.loads((HERE / "op.toml").read_text())
CANDIDATE = {
    "language": "msl",
    "header": "",
    "template": {},
    "init_value": None,
    "inout": {},
    "atomic_outputs": False,
    "ensure_row_contiguous": True,
    "shared_memory": 0,
    **tomllib.loads((HERE / "candidate.toml").read_text()),
}
NAME = OP["name"]
LANGUAGE = CANDIDATE["language"]
DTYPES = {
    "float32": mx.float32,
    "float16": mx.float16,
    "bfloat16": mx.bfloat16,
    "int32": mx.int32,
    "uint32": mx.uint32,
    "int64": mx.int64,
    "uint64": mx.uint64,
    "int8": mx.int8,
    "uint8": mx.uint8,
    "int16": mx.int16,
    "uint16": mx.uint16,
    "bool": mx.bool_,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
VERIFIED_DTYPES = tuple(OP["dtypes"])
GPU = "Metal (Apple silicon)" if LANGUAGE == "msl" else "MLX's CUDA backend on an NVIDIA GPU"
# mlxport is on no package index
INSTALL_MLXPORT = "install mlxport from a clone of its repository (pip install -e CLONE)"


def _module(name: str):
    key = f"_mlxport_op_{NAME}_{name}_{abs(hash(HERE))}"
    if key not in sys.modules:  # dataclasses look their module up there
        spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
        sys.modules[key] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[key])
    return sys.modules[key]


expr = _module("mlxport_expr")


def _gpu_available() -> bool:
    if LANGUAGE == "msl":
        return mx.metal.is_available()
    return hasattr(mx, "cuda") and mx.cuda.is_available()


def _backend() -> str:
    asked = os.environ.get("MLXPORT_KERNEL_BACKEND", "")
    if asked == "sim" and LANGUAGE == "msl":
        return "sim"
    if asked == "reference" and OP.get("reference"):
        return "reference"
    if _gpu_available():
        return "metal" if LANGUAGE == "msl" else "cuda"
    return "reference" if OP.get("reference") else "none"


backend = _backend()


# ---------------------------------------------------------------- the contract


class ContractError(ValueError):
    """Inputs of a shape, dtype or size the op was not verified for."""


def _given() -> list[dict]:
    """The inputs a caller passes (not those the op fills itself)."""
    return [t for t in OP["inputs"] if "fill" not in t]


def _signature() -> inspect.Signature:
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter(t["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD) for t in _given()
    ]
    for p in OP["params"]:
        if p.get("size") == "derived":
            continue  # computed from the sizes, as the original's host code computes it
        if p.get("size") == "given":
            params.append(inspect.Parameter(p["name"], kw))  # no shape carries it
        elif p.get("size") == "shape":
            params.append(inspect.Parameter(p["name"], kw, default=None))  # from the shapes
        else:
            params.append(inspect.Parameter(p["name"], kw, default=p.get("default")))
    return inspect.Signature(params)


SIGNATURE = _signature()


def _names(arrays: dict[str, mx.array], given: dict) -> dict:
    """The sizes the inputs' shapes give (a dimension written as a bare name), checked against
    every other dimension and against the size params the caller gave."""
    sizes: dict[str, int] = {}
    for spec in _given():
        x, dims = arrays[spec["name"]], spec["shape"]
        if x.ndim != len(dims):
            written = ", ".join(map(str, dims))
            raise ContractError(
                f"{NAME} takes {spec['name']} as a {len(dims)}-d array [{written}], got shape "
                f"{tuple(x.shape)}: reshape it"
            )
        for dim, n in zip(dims, x.shape, strict=True):
            if isinstance(dim, str) and dim.isidentifier() and sizes.setdefault(dim, n) != n:
                raise ContractError(
                    f"{NAME}: {spec['name']} gives {dim} = {n} where an earlier input gives "
                    f"{sizes[dim]}: the inputs' sizes must agree"
                )
    for p in OP["params"]:
        if p.get("size") == "shape" and given.get(p["name"]) is None:
            given[p["name"]] = sizes[p["name"]]
    names = {**given, **sizes}
    for name, value in given.items():
        if name in sizes and value != sizes[name]:
            raise ContractError(
                f"{NAME} got {name}={value}, but its inputs' shapes give {name} = {sizes[name]}"
            )
    for spec in _given():
        x = arrays[spec["name"]]
        want = expr.as_shape(spec["shape"], names, f"the shape of {spec['name']}")
        if tuple(x.shape) != want:
            raise ContractError(
                f"{NAME} takes {spec['name']} of shape [{', '.join(map(str, spec['shape']))}], "
                f"here {want}; got {tuple(x.shape)}"
            )
    for rule in OP.get("requires", []):
        if not expr.evaluate(rule, names):
            shown = ", ".join(f"{n}={names[n]}" for n in sorted(expr.names_used(rule)))
            raise ContractError(f"{NAME} was verified where {rule}, and here {shown}")
    return names


def _filled(names: dict, dtype: str) -> dict[str, mx.array]:
    """The inputs the original's host fills with one value before the launch, made here."""
    out = {}
    for t in OP["inputs"]:
        if "fill" in t:
            shape = expr.as_shape(t["shape"], names, f"the shape of {t['name']}")
            element = DTYPES[dtype if t["dtype"] == "T" else t["dtype"]]
            out[t["name"]] = mx.full(shape, t["fill"], element)
    return out


def _dtype(arrays: dict[str, mx.array]) -> str:
    """The element type under test: that of every input declared ``T``, one of those verified."""
    found = {}
    for spec in _given():
        got = DTYPE_NAMES.get(arrays[spec["name"]].dtype, str(arrays[spec["name"]].dtype))
        want = spec["dtype"]
        if want == "T":
            found.setdefault(got, spec["name"])
        elif got != want:
            raise ContractError(
                f"{NAME} takes {spec['name']} as {want}, got {got}: pass "
                f"{spec['name']}.astype(mx.{want})"
            )
    if len(found) > 1:
        raise ContractError(f"{NAME}'s inputs {', '.join(found.values())} must share one dtype")
    dtype = next(iter(found), VERIFIED_DTYPES[0])
    if dtype not in VERIFIED_DTYPES:
        raise ContractError(
            f"{NAME} was verified in {', '.join(VERIFIED_DTYPES)}, not {dtype}: cast "
            f"{found[dtype]} with .astype(mx.{VERIFIED_DTYPES[0]})"
        )
    return dtype


def _output_shapes(names: dict, dtype: str) -> list[tuple[int, ...] | None]:
    scope = {**names, "itemsize": mx.array(0, DTYPES[dtype]).itemsize}
    shapes = []
    for out in OP["outputs"]:
        try:
            shapes.append(expr.as_shape(out["shape"], scope, f"the shape of {out['name']}"))
        except expr.ExprError:
            shapes.append(None)  # a size only the kernel's own expressions give
    return shapes


# ---------------------------------------------------------------- the paths


_kernels: dict[int, object] = {}
_scalars: dict[tuple, mx.array] = {}
_warned: list[str] = []


def _scalar(value):
    """A scalar input, made once per value. Metal takes a 0-d array. On CUDA, MLX keeps arrays of
    8 bytes or less in host-written managed memory, where every block's read of the scalar
    crosses the bus; a 16-element array the GPU writes lives in device memory (the kernel reads
    element 0). Keyed by type and repr: 1 == 1.0 and 0.0 == -0.0, while NaN != NaN."""
    if not isinstance(value, bool | int | float):
        return value
    key = (type(value), repr(value))
    if key not in _scalars:
        if len(_scalars) >= 256:  # a param that changes every call (an offset) must not grow this
            _scalars.clear()
        scalar = mx.array(value)
        _scalars[key] = scalar if LANGUAGE == "msl" else mx.full((16,), value, dtype=scalar.dtype)
    return _scalars[key]


def _kernel(shared_memory: int):
    # cuda_kernel takes its dynamic shared memory at construction: one kernel per size.
    if shared_memory not in _kernels:
        c = CANDIDATE
        common = dict(
            name=c["name"],
            input_names=c["input_names"],
            output_names=c["output_names"],
            source=c["source"],
            header=c["header"],
            ensure_row_contiguous=c["ensure_row_contiguous"],
        )
        if LANGUAGE == "msl":
            _kernels[shared_memory] = mx.fast.metal_kernel(
                **common, atomic_outputs=c["atomic_outputs"]
            )
        else:
            _kernels[shared_memory] = mx.fast.cuda_kernel(**common, shared_memory=shared_memory)
    return _kernels[shared_memory]


def launch_args(scope: dict) -> dict:
    """The kernel call's grid (in threads), threadgroup, template values and output shapes and
    dtypes for inputs (``scope``: name -> array or param value) of these shapes and dtypes."""
    infos = {
        n: expr.ArrayInfo(tuple(v.shape), expr.Dtype(DTYPE_NAMES[v.dtype]))
        if isinstance(v, mx.array)
        else v
        for n, v in scope.items()
    }
    got = expr.resolve_launch(CANDIDATE, infos)
    return dict(
        template=[(k, DTYPES[v] if isinstance(v, str) else v) for k, v in got["template"]] or None,
        grid=got["grid"],
        threadgroup=got["threadgroup"],
        output_shapes=got["output_shapes"],
        output_dtypes=[DTYPES[d] for d in got["output_dtypes"]],
        init_value=CANDIDATE["init_value"],
        shared_memory=got["shared_memory"],
    )


def _run_kernel(scope: dict) -> list[mx.array]:
    args = launch_args(scope)
    inputs = [_scalar(scope[n]) for n in CANDIDATE["input_names"]]
    return list(_kernel(args.pop("shared_memory"))(inputs=inputs, **args))


def _simulate(scope: dict) -> list[mx.array]:
    """The kernel on mlxport's Metal simulator (needs mlxport installed)."""
    try:
        from mlxport.backends import get_backend
        from mlxport.spec import KernelCandidate
    except ImportError as e:
        raise RuntimeError(
            f"MLXPORT_KERNEL_BACKEND=sim runs {NAME} on mlxport's simulator, which is not "
            f"installed here: {INSTALL_MLXPORT}, or unset MLXPORT_KERNEL_BACKEND"
        ) from e
    candidate = KernelCandidate.model_validate(CANDIDATE)
    run = get_backend("sim").run(candidate, scope)  # params beyond the inputs: in scope
    if not run.ok:
        raise RuntimeError(f"the simulator could not run {NAME}: {run.error}")
    dtypes = launch_args(scope)["output_dtypes"]
    return [mx.array(o).astype(d) for o, d in zip(run.outputs, dtypes, strict=True)]


def _reference():
    if not _warned:
        _warned.append(backend)
        asked = os.environ.get("MLXPORT_KERNEL_BACKEND") == "reference"
        why = "MLXPORT_KERNEL_BACKEND=reference" if asked else f"no {GPU} here"
        warnings.warn(
            f"{NAME} runs its reference implementation (reference.py), not the ported kernel: "
            f"{why}",
            RuntimeWarning,
            stacklevel=4,
        )
    return getattr(_module("reference"), OP["reference"])


def _started_as(outs: list[mx.array], scope: dict) -> list[mx.array]:
    """In-out outputs: what the kernel never wrote (still NaN) is the input's, for an output the
    original writes only in part (of one it writes whole, a NaN is a value the kernel wrote)."""
    whole = {OP["order"][i] for i, t in enumerate(OP["outputs"]) if t.get("whole")}
    for name, src in CANDIDATE["inout"].items():
        k = CANDIDATE["output_names"].index(name)
        if k in whole:
            continue
        start = scope[src].reshape(outs[k].shape).astype(outs[k].dtype)
        outs[k] = mx.where(mx.isnan(outs[k]), start, outs[k])
    return outs


def op(*args, **kwargs):
    made = [t["name"] for t in OP["inputs"] if "fill" in t and t["name"] in kwargs]
    if made:
        raise ContractError(
            f"{NAME} makes {made[0]} itself (the host code it was ported from fills it, or passes "
            f"none): call it without {made[0]}"
        )
    bound = SIGNATURE.bind(*args, **kwargs)
    values = dict(bound.arguments)
    arrays = {t["name"]: values.pop(t["name"]) for t in _given()}
    for name, x in arrays.items():
        if not isinstance(x, mx.array):
            raise ContractError(f"{NAME} takes {name} as an mx.array, got {type(x).__name__}")
    params = {
        p["name"]: values.get(p["name"], p.get("default"))
        for p in OP["params"]
        if p.get("size") not in ("shape", "derived") or values.get(p["name"]) is not None
    }
    dtype = _dtype(arrays)
    names = _names(arrays, params)
    for p in OP["params"]:
        if p.get("size") == "derived":
            names[p["name"]] = expr.evaluate(p["expr"], names)
    params = {p["name"]: names[p["name"]] for p in OP["params"]}
    arrays = {**arrays, **_filled(names, dtype)}
    # in the contract's order, and row-contiguous as the port was verified on (a kernel that
    # asked for its inputs' own layout was never checked on a strided one)
    arrays = {t["name"]: mx.contiguous(arrays[t["name"]]) for t in OP["inputs"]}
    if backend == "none":
        raise RuntimeError(
            f"{NAME}'s kernel needs {GPU}, which is not here, and the port has no MLX reference "
            f"to fall back to: run it where that is, or set MLXPORT_KERNEL_BACKEND=sim to run "
            f"the kernel on mlxport's Metal simulator (slow; to have mlxport, "
            f"{INSTALL_MLXPORT})"
        )
    if backend == "reference":
        task_params = {p["name"]: params[p["name"]] for p in OP["params"] if p.get("param", True)}
        outs = _reference()(*arrays.values(), **task_params)
        outs = list(outs) if isinstance(outs, tuple | list) else [outs]
    else:
        scope = {**arrays, **params}
        outs = _run_kernel(scope) if backend != "sim" else _simulate(scope)
        outs = _started_as(outs, scope)
        outs = [outs[i] for i in OP["order"]]
    shapes = _output_shapes(names, dtype)
    outs = [
        o if s is None or o.size != _size(s) else o.reshape(s)
        for o, s in zip(outs, shapes, strict=True)
    ]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


op.__name__ = op.__qualname__ = NAME
op.__doc__ = OP.get("description") or __doc__
op.__signature__ = SIGNATURE
globals()[NAME] = op
__all__ = ["backend", NAME]
