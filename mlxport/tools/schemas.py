"""Argument schemas of the agent's tools. The class docstrings and field descriptions are what
the model reads, so they are written for it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_SOURCE_CHARS = 64_000
ID = "Id returned by compile_kernel (or the candidate's name)"


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class read_cuda_source(ToolArgs):
    """Read the CUDA source being ported: a structured summary (kernels, parameters read/written,
    shared memory, intrinsics, launch sites, and how each feature maps to Metal) followed by the
    numbered source. Call this first."""

    kernel: str | None = Field(
        None, description="Kernel to focus on; default: the task's entry kernel."
    )
    show_source: bool = Field(True, description="Include the numbered source text.")
    start_line: int = Field(
        1,
        ge=1,
        description="First source line shown; long files come in pages and each "
        "page says where the next one starts.",
    )


class query_hardware_kb(ToolArgs):
    """Search the Apple-GPU knowledge base: chip figures, Metal limits, MSL functions, the
    CUDA-to-Metal mapping, mx.fast.metal_kernel rules, optimisation playbook, common porting bugs.
    Returns the top sections with their sources."""

    query: str = Field(
        description="What you want to know, e.g. 'simd_shuffle_xor semantics'.", max_length=300
    )
    chip: str | None = Field(
        None, description="Optional chip name such as 'M3 Max' to include its figures."
    )


class compile_kernel(ToolArgs):
    """Compile a kernel candidate on the session's backend and register it. Give a complete
    candidate, or `based_on` an earlier candidate id plus only the fields you change.

    You write only the kernel BODY: MLX generates the signature from input_names and output_names
    (inputs become `const device T* name`, scalars `const constant T& name`, outputs
    `device T* name`) and adds attributes such as thread_position_in_grid when the body uses them.
    Expressions (output_shapes, output_dtypes, grid, threadgroup, template values) may use input
    names with .shape/.dtype/.size/.ndim/.itemsize, shape[i], + - * // %, min, max, ceildiv, dtype
    names and the task's params. `grid` counts THREADS, not threadgroups."""

    based_on: str | None = Field(
        None, description="Id (or name) of an earlier candidate to start from."
    )
    name: str | None = Field(
        None,
        description="Kernel name, a C identifier; other tools take it in place of the id (the "
        "latest candidate of that name).",
    )
    source: str | None = Field(None, description="The kernel body.", max_length=MAX_SOURCE_CHARS)
    header: str | None = Field(
        None, description="Helper functions placed before the kernel.", max_length=MAX_SOURCE_CHARS
    )
    input_names: list[str] | None = Field(
        None, description="Task inputs and params, in argument order."
    )
    output_names: list[str] | None = Field(
        None, description="Outputs, named as the task's outputs."
    )
    output_shapes: list[str | list[str | int]] | None = Field(
        None, description="Per output, e.g. 'x.shape'."
    )
    output_dtypes: list[str] | None = Field(None, description="Per output, e.g. 'x.dtype'.")
    grid: list[str | int] | None = Field(
        None, description="Three expressions: total THREADS in x, y, z."
    )
    threadgroup: list[str | int] | None = Field(
        None, description="Three expressions: threadgroup size."
    )
    template: dict[str, str | int] | None = Field(
        None, description="Template constants: int, bool or dtype."
    )
    init_value: float | None = Field(None, description="Fill outputs with this before the launch.")
    inout: dict[str, str] | None = Field(
        None,
        description=(
            "In-out buffers: output name -> the input it starts as. The output starts as NaN; read "
            "an element "
            "back from the output once written (NaN: not yet, take the input's); unwritten "
            "elements become the "
            "input's after the launch."
        ),
    )
    atomic_outputs: bool | None = Field(
        None, description="Make every output device atomic<T>* (Metal)."
    )
    ensure_row_contiguous: bool | None = Field(
        None, description="False: index with x_shape/x_strides."
    )
    shared_memory: str | int | None = Field(
        None, description="CUDA only: bytes of dynamic shared memory."
    )


class run_correctness(ToolArgs):
    """Run a compiled candidate on fresh random inputs for every visible shape case and dtype of
    the task and compare with the reference (tolerances come from the task). Reports where and
    how outputs differ."""

    candidate_id: str = Field(description=ID)


class benchmark(ToolArgs):
    """Time a candidate that passed run_correctness against the task's baselines (the strongest
    native MLX op and the naive path), side by side, on realistic sizes. On the simulator there is
    no timing, only a labelled ESTIMATE for the session's Apple chip from what the candidate did at
    the bench case (memory lines, threadgroup-memory bank passes, occupancy, barriers and SIMD-group
    functions, counted); a candidate wrong there gets none and no longer counts as correct."""

    candidate_id: str = Field(description=f"{ID}, of a candidate that passed run_correctness.")


class show_candidate(ToolArgs):
    """Show a registered candidate in full (source and launch settings) and its results so far."""

    candidate_id: str = Field(description=ID)


class update_plan(ToolArgs):
    """Maintain the optimisation plan: a tree of ideas. `add` an idea (with rationale and ratings:
    expected gain, difficulty, confidence; optionally under a parent), `select` the idea you work on
    next, or `close` one as done or abandoned with a note. Give `candidate` to record a candidate
    as tried under the idea; its measured outcomes are then attached to it. In tree search the
    best-rated open idea is selected for you each cycle."""

    action: Literal["add", "select", "close"] = Field(
        description="add an idea, select one to work on, or close one."
    )
    idea: str | None = Field(
        None, description="For add: the idea, e.g. 'one SIMD-group per row'.", max_length=300
    )
    rationale: str | None = Field(None, description="For add: why it should help.", max_length=600)
    expected_gain: str | None = Field(
        None, description="For add: e.g. '1.5x' or 'fixes fp16'.", max_length=60
    )
    parent: str | None = Field(None, description="For add: id of the parent idea.")
    difficulty: float | None = Field(
        None, ge=0, le=1, description="For add: 0 easy .. 1 hard (default 0.5)."
    )
    confidence: float | None = Field(
        None, ge=0, le=1, description="For add: 0 .. 1 that the gain is real (default 0.5)."
    )
    node_id: str | None = Field(None, description="For select/close: the idea's id, e.g. 'p2'.")
    status: Literal["done", "abandoned"] | None = Field(None, description="For close.")
    note: str | None = Field(None, description="For close: what was learned.", max_length=600)
    candidate: str | None = Field(
        None,
        description="A candidate id (or name) tried under this idea (the one added, "
        "selected or closed).",
    )


class verify(ToolArgs):
    """Run the final verification's extra checks on a candidate that passed run_correctness:
    held-out shapes you have not seen, threads and threadgroups run in reversed and shuffled order,
    outputs starting as garbage. Returns verdicts only (no shapes). Each call counts against the
    session's verification budget; a candidate is verified once."""

    candidate_id: str = Field(description=f"{ID}, of a candidate that passed run_correctness.")


class diff_candidates(ToolArgs):
    """What changed between two candidates: a unified diff of their source and launch settings."""

    old: str = Field(description="Id (or name) of the earlier candidate.")
    new: str = Field(description="Id (or name) of the later candidate.")


class read_reference(ToolArgs):
    """Read what candidates are checked against: the task's reference (its Python source, or the
    original CUDA kernel when the task has none), the baselines it is timed against, and the
    tolerances."""


class ask_user(ToolArgs):
    """Ask the person a question and wait for the answer. Only when you are truly stuck on
    something only they know (intent, an ambiguous requirement); unattended runs answer that no one
    is there."""

    question: str = Field(description="One clear question.", max_length=600)


class session(ToolArgs):
    """List this session's candidates with their verdicts (compile, correctness, verify, speed),
    the verifications left, the candidate finish would choose and why, the plan, and whether the
    session is closed."""


class finish(ToolArgs):
    """End the session. The candidate you name is taken, or else the best: correct, then one that
    passed verify, then the fastest (the earliest where the backend does not time); the result says
    why. It is then checked on held-out shapes and extra seeds before it is accepted."""

    candidate_id: str | None = Field(
        None, description="Candidate id (or name) to submit; default: the best so far."
    )
    summary: str = Field("", description="What you did and why it is the result.", max_length=2000)
