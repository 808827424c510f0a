"""Tasks: what to port and how it is judged. Loading task folders and the suite (`folder`),
drawing inputs (`inputs`), calling references and baselines (`calls`), the scaffold of a new task
(`scaffold`), and the one request a task is made from (`request`). Making a task from a user's
.cu file needs the CUDA reader and executor, so it sits higher, in `tasks.make`.
"""

from mlxport.tasks.calls import MLX_LOCK, baseline, call, golden, resolve, to_numpy
from mlxport.tasks.folder import (
    MEMORY_BOUND,
    SUITE_DIR,
    TaskError,
    expert_ports,
    find_task,
    load_candidate,
    load_task,
    suite_names,
)
from mlxport.tasks.inputs import (
    DTYPE_NAMES,
    MX_DTYPES,
    arg_infos,
    case_infos,
    dtype_name,
    make_inputs,
    physical_memory,
)

__all__ = [
    "DTYPE_NAMES",
    "MEMORY_BOUND",
    "MLX_LOCK",
    "MX_DTYPES",
    "SUITE_DIR",
    "TaskError",
    "arg_infos",
    "baseline",
    "call",
    "case_infos",
    "dtype_name",
    "expert_ports",
    "find_task",
    "golden",
    "load_candidate",
    "load_task",
    "make_inputs",
    "physical_memory",
    "resolve",
    "suite_names",
    "to_numpy",
]
