"""Tasks, candidates and results: the contract every part of mlxport speaks.

No heavy imports here (no mlx, no langgraph): this package is loaded by worker processes, the MCP
server and the GPU machine alike. `task` (what to port), `candidate` (a kernel attempt), `results`
(compile, correctness and benchmark reports), `toml` (the one TOML writer).
"""

from mlxport.expr import DTYPES, ArrayInfo, Dtype, ExprError, evaluate
from mlxport.spec.base import FLOAT_DTYPES
from mlxport.spec.candidate import CPP_KEYWORDS, KernelCandidate, Launch, template_problem
from mlxport.spec.results import (
    BenchmarkReport,
    CaseResult,
    CompileResult,
    CoreFigures,
    CorrectnessReport,
    Datasheet,
    Diagnostic,
    Timing,
    Verdict,
)
from mlxport.spec.task import (
    Baselines,
    Cases,
    Cost,
    Init,
    KernelTask,
    Original,
    OriginalLaunch,
    Param,
    TensorSpec,
    Tolerance,
)

__all__ = [
    "CPP_KEYWORDS",
    "DTYPES",
    "FLOAT_DTYPES",
    "ArrayInfo",
    "Baselines",
    "BenchmarkReport",
    "CaseResult",
    "Cases",
    "CompileResult",
    "CorrectnessReport",
    "Cost",
    "CoreFigures",
    "Datasheet",
    "Diagnostic",
    "Dtype",
    "ExprError",
    "Init",
    "KernelCandidate",
    "KernelTask",
    "Launch",
    "Original",
    "OriginalLaunch",
    "Param",
    "TensorSpec",
    "Timing",
    "Tolerance",
    "Verdict",
    "evaluate",
    "template_problem",
]
