"""What the metal and cuda backends' worker does besides launching (backends/gpu_worker.py), on
this machine's MLX: the timing worker's inputs, drawn once before the timing lock and checked after
every timing, and the check that a kernel left its inputs as they were."""

import mlx.core as mx
import numpy as np

from mlxport.backends import confine, gpu_worker
from mlxport.redaction import SECRET_NAME
from mlxport.tasks import load_task


def test_the_timing_inputs_are_drawn_once_and_a_write_into_them_is_seen(monkeypatch):
    """backends/gpu.py asks the timing worker to ``prepare`` before it takes the lock: the inputs
    (and the reference's outputs) drawn there are the ones ``measure`` then times on; another seed
    draws afresh; one element written by a candidate changes the fingerprint measure compares."""
    monkeypatch.setattr(gpu_worker, "_TIMING_INPUTS", {})
    task = load_task("softmax_rows")
    payload = {
        "task_dir": str(task.folder),
        "case": task.cases.visible[0],
        "dtype": "float32",
        "seed": 3,
    }
    gpu_worker.prepare(payload)
    sets, refs, fingerprint = gpu_worker._timing_inputs(payload)
    assert len(sets) == len(refs) == 3 and gpu_worker._timing_inputs(payload)[0] is sets
    other, _, _ = gpu_worker._timing_inputs({**payload, "seed": 4})
    assert other is not sets and not mx.array_equal(other[0]["x"], sets[0]["x"]).item()
    assert gpu_worker._fingerprint(sets) == fingerprint
    sets[1]["x"][5, 3] = sets[1]["x"][5, 3] + 1.0
    assert gpu_worker._fingerprint(sets) != fingerprint


def test_an_input_changed_by_the_launches_is_named():
    """``run`` fails a kernel that wrote into an input (its pointer is const, but a cast takes that
    away): the arrays as sent are compared with the arrays after the launches, bfloat16 included."""
    x = np.arange(8, dtype=np.float32)
    bits = (np.arange(8, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    sets = [
        [{"name": "x", "array": 0, "dtype": "float32"}, {"name": "n", "value": 8}],
        [
            {"name": "x", "array": 0, "dtype": "float32"},
            {"name": "h", "array": 1, "dtype": "bfloat16"},
        ],
    ]
    given = [gpu_worker._inputs(specs, [x, bits]) for specs in sets]
    assert gpu_worker._written_inputs(sets, [x, bits], given) is None
    given[1]["h"][2] = 7.0
    assert gpu_worker._written_inputs(sets, [x, bits], given) == "h"


# What a GPU worker cannot start or see its device without (or runs another path without),
# written down here apart from the list it is checked against.
GPU_NEEDS = {
    "cuda": [
        "LD_LIBRARY_PATH",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_CACHE_PATH",
        "CUDA_MPS_PIPE_DIRECTORY",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "NVIDIA_TF32_OVERRIDE",
        "MLX_USE_CUDA_GRAPHS",
        "MLX_ENABLE_TF32",
    ],
    "metal": [
        "MLX_METAL_DEBUG",
        "METAL_DEVICE_WRAPPER_TYPE",
        "MTL_CAPTURE_ENABLED",
        "MLX_ENABLE_TF32",
    ],
}


def test_a_gpu_worker_gets_its_runtimes_variables_and_no_other_of_their_families(monkeypatch):
    """The environment allowlist holds exact names: every variable the GPU runtimes need reaches a
    worker (mlx_kernel reads MLX_USE_CUDA_GRAPHS there), none of them looks like a secret, and an
    unknown name of the same families stays out."""
    needed = {name for names in GPU_NEEDS.values() for name in names}
    for name in needed | {"CUDA_X", "MLX_PROVIDER", "NVIDIA_API_BASE"}:
        monkeypatch.setenv(name, "1")
    env = confine.worker_env()
    assert needed <= set(env), needed - set(env)
    assert not {"CUDA_X", "MLX_PROVIDER", "NVIDIA_API_BASE"} & set(env)
    assert not [n for n in confine.GPU_RUNTIME_NAMES if SECRET_NAME.search(n)]
