"""The op a port ships (mlxport/op/kernel.py, copied beside candidate.toml and op.toml): sizes from
its inputs' shapes, the dtypes it was verified in, one sentence for inputs outside its contract,
the same shapes on every path, and its kernel run on the simulator matching the golden."""

import importlib.util
import inspect
import sys

import mlx.core as mx
import numpy as np
import pytest

from mlxport.op import write_op
from mlxport.op.check import golden_cases
from mlxport.tasks import expert_ports, load_task


def written(tmp_path, task_name: str, language: str = "msl", *, backend: str | None = None):
    task = load_task(task_name)
    folder = write_op(
        tmp_path / task_name, task, expert_ports(task)[language], label="test", model="t"
    )
    spec = importlib.util.spec_from_file_location(
        f"op_{task_name}_{language}", folder / "kernel.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if backend:
        module.backend = backend
    return task, module


def test_sizes_come_from_the_shapes_and_a_size_param_is_checked_against_them(tmp_path):
    task, op = written(tmp_path, "softmax_rows", backend="sim")
    x = mx.random.normal((3, 37))
    out = op.softmax_rows(x)
    assert out.shape == (3, 37) and np.allclose(
        np.array(out), np.array(mx.softmax(x, axis=-1)), atol=1e-6
    )
    with pytest.raises(op.ContractError, match="2-d array"):
        op.softmax_rows(mx.zeros((3, 5, 7)))  # the reference path would take it; no path does


def test_inputs_outside_the_contract_are_refused_in_one_sentence(tmp_path):
    task, op = written(tmp_path, "rmsnorm", backend="sim")
    x, w = mx.ones((4, 8)), mx.ones((8,))
    assert list(inspect.signature(op.rmsnorm).parameters) == ["x", "weight", "eps"]
    for args, words in (
        ((x, mx.ones((9,))), "weight gives D = 9 where an earlier input gives 8"),
        ((x.astype(mx.int32), w.astype(mx.int32)), "not int32"),
        ((x, w.astype(mx.float16)), "must share one dtype"),
        (([1.0], w), "as an mx.array"),
    ):
        with pytest.raises(op.ContractError, match=None) as e:
            op.rmsnorm(*args)
        assert words in str(e.value) and "\n" not in str(e.value)


def test_without_a_gpu_or_a_reference_a_call_says_what_to_do(tmp_path):
    task, op = written(tmp_path, "vector_add", backend="none")
    with pytest.raises(RuntimeError, match="MLXPORT_KERNEL_BACKEND=sim"):
        op.vector_add(mx.ones((4,)), mx.ones((4,)))


def test_the_reference_path_warns_once_and_returns_the_contracts_shapes(tmp_path):
    task, op = written(tmp_path, "vector_add", backend="reference")
    with pytest.warns(RuntimeWarning, match="runs its reference implementation"):
        out = op.vector_add(mx.ones((5,)), mx.ones((5,)))
    assert out.shape == (5,) and float(out.sum()) == 10.0


def test_scalars_are_made_arrays_once_per_value(tmp_path):
    """A scalar param becomes a 0-d array once per value and type on Metal; on CUDA a 16-element
    array in device memory (MLX keeps arrays of 8 bytes or less in host-written managed memory)."""
    _, op = written(tmp_path / "m", "rmsnorm")
    assert op._scalar(1e-5) is op._scalar(1e-5)
    assert op._scalar(1).dtype == mx.int32 and op._scalar(1.0).dtype == mx.float32
    assert str(op._scalar(-0.0).item()) == "-0.0" and str(op._scalar(0.0).item()) == "0.0"
    assert op._scalar(float("nan")) is op._scalar(float("nan"))
    arr = mx.array([2.0])
    assert op._scalar(arr) is arr
    _, cuda = written(tmp_path / "c", "rmsnorm", "cuda")
    assert cuda._scalar(1e-5).shape == (16,) and cuda._scalar(1e-5) is cuda._scalar(1e-5)


def test_the_written_evaluator_stands_alone(tmp_path):
    written(tmp_path, "vector_add")
    text = (tmp_path / "vector_add" / "mlxport_expr.py").read_text()
    assert "import mlxport" not in text and "from mlxport" not in text


@pytest.mark.parametrize("name", ["vector_add", "layernorm", "rope"])
def test_the_op_on_the_simulator_matches_the_golden_at_sizes_of_no_case(tmp_path, name):
    task, op = written(tmp_path, name, backend="sim")
    rng_case = {**task.cases.visible[-1]}
    for k, v in list(rng_case.items()):
        if isinstance(v, int) and not isinstance(v, bool) and k in task.dims():
            rng_case[k] = max(1, v // 3 + 1)
    (g,) = golden_cases(task.model_copy(update={"dtypes": task.dtypes[:1]}), [rng_case], seed=3)
    inputs = [mx.array(g["inputs"][t.name]) for t in task.inputs]
    out = op.op(*inputs, **g["params"])
    outs = list(out) if isinstance(out, tuple) else [out]
    for o, want in zip(outs, g["outputs"], strict=True):
        tol = task.tolerance[g["dtype"]]
        np.testing.assert_allclose(np.array(o), want, atol=tol.atol, rtol=tol.rtol)


def test_kernel_py_is_a_module_of_mlxport_like_any_other():
    """The file copied as every port's kernel.py is linted and imported here as code, not kept
    as a string template."""
    import mlxport.op

    assert (mlxport.op.HERE / "kernel.py").read_text().startswith('"""An MLX op')
    assert "kernel" not in sys.modules  # each port's copy is loaded by path, never by name


PATHS = """
const uint C = uint(x_shape[1]);
const uint row = threadgroup_position_in_grid.x;
if (C % 4 == 0 && row < 8) {
    out[row] = x[row];
}
out[0] = (x_shape[0] > 100) ? x[1] : x[0];
"""


def test_the_size_dependent_conditions_of_a_candidate_are_read_as_expressions():
    from mlxport.verify.paths import conditions, side

    task = load_task("softmax_rows")
    port = expert_ports(task)["msl"]
    candidate = port.model_copy(update={"source": PATHS})
    found = conditions(task, candidate)
    assert "(x.shape[1]) % 4 == 0" in found and "x.shape[0] > 100" in found
    assert "1024 <= ceildiv(x.shape[1], 128) * 32" in found  # the min() of its launch
    assert not any("row" in c for c in found)  # a thread's position is no size
    assert side("(x.shape[1]) % 4 == 0", task, candidate, {"R": 2, "C": 6}) is False


def test_a_path_no_case_takes_gets_a_case_of_its_own(tmp_path):
    """A kernel right at every case of its task, wrong only where a size the task never has
    sends it down another path: the op check draws a case for that path, and it fails there."""
    from mlxport.tools.final import op_cases

    task = load_task("vector_add")
    port = expert_ports(task)["msl"]
    wrong = port.model_copy(
        update={
            "source": "uint i = thread_position_in_grid.x;\n"
            "out[i] = a_shape[0] < 3 ? a[i] : a[i] + b[i];\n"
        }
    )
    found = op_cases(task, wrong, seed=1)
    extra = [c for c in found.paths if c["N"] < 3]
    assert extra and any(
        "the path where a.shape[0] < 3 is true runs at N=" in n for n in found.notes
    )
    assert not found.unreached
    g = golden_cases(task.model_copy(update={"dtypes": ["float32"]}), extra, seed=1)
    folder = write_op(tmp_path / task.name, task, wrong, label="t", model="t")
    from mlxport.backends import get_backend
    from mlxport.op.check import check_op

    (result,) = check_op(folder, task, get_backend("sim"), g)
    assert result.verdict == "fail" and result.mode == "op"


def test_the_gpu_worker_runs_an_op_from_the_files_its_request_carries(tmp_path):
    """A GPU worker sees none of mlxport's folders: the op's files travel in the request. Here
    the worker's handler runs in this process, with the simulator standing in for the GPU."""
    from mlxport.backends import gpu_worker, op_call

    task, _ = written(tmp_path, "vector_add")
    files = {n: (tmp_path / "vector_add" / n).read_text() for n in op_call.OP_TEXT}
    a, b = np.ones(5, np.float32), np.full(5, 2.0, np.float32)
    header = {"files": files, "backend": "sim", "dtypes": ["float32"] * 2, "params": {}}
    reply, outs = gpu_worker.call_op(header, [a, b])
    assert not reply.get("error") and np.array_equal(outs[0], a + b)


def test_a_kernel_asking_for_its_inputs_layout_gets_them_contiguous_as_verified(tmp_path):
    """Verification passes row-contiguous inputs only: a kernel that sets ensure_row_contiguous =
    false and ignores the strides would be wrong on a strided view, so the op makes its inputs
    contiguous, as they were when it was verified."""
    import importlib.util

    task = load_task("vector_add")
    blind = expert_ports(task)["msl"].model_copy(update={"ensure_row_contiguous": False})
    folder = write_op(tmp_path / "op", task, blind, label="t", model="t")
    spec = importlib.util.spec_from_file_location("op_strided", folder / "kernel.py")
    op = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(op)
    op.backend = "sim"
    big = mx.random.normal((2048,))
    a, b = big[::2], mx.random.normal((1024,))
    assert np.allclose(np.array(op.vector_add(a, b)), np.array(a + b), atol=1e-6)
