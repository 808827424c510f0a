"""Where MLX's CUDA backend exists: every suite kernel, run as written on the GPU through
``mx.fast.cuda_kernel``, agrees with the same kernel run on the CPU executor at every case (held-out
too) and dtype. The GPU side is the rules translator's CUDA rendering of kernel.cu (the kernel's
body and launch as the CUDA backend takes them); the golden is the original kernel on the CPU
executor, not the task's reference, so this checks the executor against real hardware."""

import pytest

from mlxport.backends import availability, get_backend
from mlxport.tasks import load_task, suite_names
from mlxport.translate.translator import Untranslatable, translate_task
from mlxport.verify.correctness import run_correctness

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not availability()["cuda"].ok, reason="needs MLX's CUDA backend"),
]


@pytest.mark.parametrize("name", suite_names())
def test_the_cpu_executor_and_the_gpu_agree_on_the_original_kernel(name):
    task = load_task(name)
    if task.original is None:
        pytest.fail(f"{name} has no [original]: the CPU executor cannot run its kernel")
    try:
        on_gpu = translate_task(task, "cuda").candidate
    except Untranslatable:
        # vector_add's kernel is float-only (a float4 view): the original runs in float32
        task = task.model_copy(update={"dtypes": ["float32"]})
        on_gpu = translate_task(task, "cuda").candidate
    against_original = task.model_copy(update={"reference": None})
    report = run_correctness(against_original, on_gpu, get_backend("cuda"), seed=2026, heldout=True)
    assert report.golden.startswith("the original kernel"), report.golden
    assert report.ok, report.summary()
