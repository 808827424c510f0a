"""The candidate's launch from the host launch: template values, the threadgroup (block) size,
the grid in threads, and the size of dynamic shared memory, as expressions over the inputs."""

from __future__ import annotations

import ast
import re

from mlxport.expr import ITEMSIZE, ExprError, evaluate
from mlxport.tasks.inputs import case_infos
from mlxport.translate.bind.arms import arm_rules
from mlxport.translate.bind.job import KernelJob
from mlxport.translate.bind.kernel_facts import KernelFacts
from mlxport.translate.bind.launch_fit import fitted_plan
from mlxport.translate.bind.result import Untranslatable
from mlxport.translate.host.binding import atom
from mlxport.translate.host.cexpr import (
    TYPE_SIZES,
    CaseBound,
    CExprError,
    lower,
    simplify,
    to_expr,
)
from mlxport.translate.host.launch import (
    LaunchPlan,
    Sites,
    combined,
    find_unknown,
    launch_sites,
    one_site,
)
from mlxport.translate.host.symbolic import SiteValues
from mlxport.translate.host.type_constants import enumerators
from mlxport.translate.reading.cudafile import SharedDecl

Template = dict[str, str | int | bool]
_ERR = "the launch math cannot be expressed over the task's inputs and params"


class TypeSizes:
    """sizeof for the kernel's template typenames: the itemsize of the tensor bound to a pointer
    of that type; a host typename is the kernel typename the launches pass it as."""

    def __init__(self, job: KernelJob):
        self.job = job
        self.host_typenames: dict[str, str] = {}
        for s in job.cf.launches:
            if s.kernel == job.info.name:
                for tp, arg in zip(job.info.template_params, s.template_args, strict=False):
                    if tp.kind == "typename":
                        self.host_typenames[arg.strip()] = tp.name

    def __call__(self, name: str) -> ast.expr | None:
        for tp in self.job.info.template_params:
            if tp.kind == "typename" and tp.name == name:
                t = typename_tensor(self.job, name)
                return atom(f"{t}.itemsize") if t else None
        host_t = self.host_typenames.get(name)
        if host_t:
            return self(host_t)
        return self._pointee(name)

    def _pointee(self, name: str) -> ast.expr | None:
        """sizeof(floatX) where a kernel pointer is a floatX* (a typedef the dtype picks): the
        itemsize of the tensor bound to it."""
        if self.job.task is None:
            return None
        t = typename_tensor(self.job, name)
        if t is not None:
            return atom(f"{t}.itemsize")
        fixed = typename_dtype(self.job, name)
        return ast.Constant(ITEMSIZE[fixed]) if fixed in ITEMSIZE else None


def typename_dtype(job: KernelJob, tname: str) -> str | None:
    """The fixed dtype of the tensor a pointer of type `tname` is bound to (an output of float32,
    say)."""
    for p in job.info.params:
        base = re.sub(r"\b(const|volatile|__restrict__|__restrict)\b", "", p.base_type).strip()
        if base == tname and p.is_pointer and job.task is not None:
            for name in re.findall(r"\w+", job.bindings.get(p.name, "")):
                spec = job.binder.spec(name)
                if spec is not None and spec.dtype != "T":
                    return spec.dtype
    return None


def typename_tensor(job: KernelJob, tname: str) -> str | None:
    """An input whose dtype the template typename `tname` is (bound to a pointer of that type)."""
    for p in job.info.params:
        base = re.sub(r"\b(const|volatile|__restrict__|__restrict)\b", "", p.base_type).strip()
        if base == tname and (p.is_pointer or p.is_reference):
            t = job.bindings.get(p.name, "").split(" ")[0]
            src = job.binder.dtype_source(t) if job.task else t
            if src:
                return src
    return None


def plan(job: KernelJob, sizes: TypeSizes) -> LaunchPlan:
    """The launch from the host code; where that cannot be followed and the task records the
    original's launches, the launch they fit (launch_fit)."""
    found = None
    try:
        found = launch_sites(job.cf, job.root, job.info, job.binder, sizes, job.target)
        got = None if found is None else combined(found)
    except CExprError as e:
        got, problem = None, Untranslatable(e.what, e.line, _ERR)
    except Untranslatable as e:
        got, problem = None, e
    else:
        problem = None if got is None else _unknown(got)
    several = found is not None and len(found.values) > 1
    if several and (problem is not None or (job.task is not None and job.task.cases.requires)):
        # a task whose requires keep it to the arm its cases take carries that arm only
        taken = site_the_cases_take(job, found)
        if taken is not None:
            got, problem = taken, None
    if got is None and problem is None:
        problem = Untranslatable(
            f"kernel {job.info.name}",
            job.info.line,
            "the file has no launch of it, so the grid and block sizes are unknown",
        )
    if problem is not None:
        fitted = fitted_plan(job)
        if fitted is None:
            raise problem
        got = fitted
    job.notes.extend(got.notes)
    return got


def case_rules(job: KernelJob) -> list[str]:
    """The comparisons over the sizes the task's cases bind under which the host code reaches the
    launch its visible cases take (`arms.arm_rules`): the task's requires, so the op refuses sizes
    another arm of the host code would take."""
    task = job.task
    if task is None or task.original is None:
        return []
    try:
        found = launch_sites(job.cf, job.root, job.info, job.binder, TypeSizes(job), job.target)
    except CExprError:
        return []
    names = set(task.original.bound) & ({p.name for p in task.params} | task.dims())
    dims = {
        f"{t.name}.shape[{i}]": d
        for t in task.inputs
        for i, d in enumerate(t.shape)
        if isinstance(d, str) and d.isidentifier()
    }
    if found is None:
        return []
    return arm_rules(_sites_taken(job, found) or found.values, task.cases.visible, names, dims)


def _sites_taken(job: KernelJob, found: Sites) -> list[SiteValues]:
    """The launch sites whose values are the original's launch at every visible case."""
    out = []
    for site in found.values:
        plan = one_site(found, site, "")
        plan.targs = {k: _fixed_by_cases(job, k, v) for k, v in plan.targs.items()}
        if all(_reproduces(job, plan, case) for case in job.task.cases.visible):
            out.append(site)
    return out


def case_bound(job: KernelJob) -> list[str]:
    """The names the launch's grid, block, shared bytes and template arguments need that only the
    task's cases bind: no param or input of the task gives them (a grid of ``B`` by ``NH`` blocks
    over flat buffers). A constant of the file is none (a param of its name would hide it from
    the kernel's body, which reads the file's value as the original does)."""
    try:
        found = launch_sites(job.cf, job.root, job.info, job.binder, TypeSizes(job), job.target)
    except CExprError:
        return []
    out: list[str] = []
    for site in found.values if found is not None else []:
        for value in [*site.blocks, *site.threads, site.smem, *site.targs.values()]:
            bad = find_unknown(value)
            if isinstance(bad, CaseBound) and bad.name not in [*out, *job.macros]:
                out.append(bad.name)
    return out


def site_the_cases_take(job: KernelJob, found: Sites) -> LaunchPlan | None:
    """Where the launches' branches cannot be combined into one expression, the one launch whose
    values reproduce the original's launch at every case of the task (None if not exactly one)."""
    task = job.task
    if task is None or task.original is None:
        return None
    fits = []
    for site in found.values:
        plan = one_site(found, site, "")
        plan.targs = {k: _fixed_by_cases(job, k, v) for k, v in plan.targs.items()}
        if _unknown(plan) is None and all(
            _reproduces(job, plan, case) for case in task.all_cases()
        ):
            fits.append(plan)
    if not fits or any(_values(p) != _values(fits[0]) for p in fits[1:]):
        return None
    fits[0].notes[-1] = (
        f"the launch at line {fits[0].line} of {found.host}(): of its {len(found.values)} "
        f"launches of {job.info.name}, the one whose grid, block and template arguments are the "
        "original's at every case of the task (its branch conditions could not be combined into "
        "one expression); sizes where the host code takes another branch are not this port's"
    )
    return fits[0]


def _fixed_by_cases(job: KernelJob, name: str, value: ast.expr) -> ast.expr:
    """A template argument the host code leaves unknown (`forward`, a template parameter of the
    launcher that --template fixed) as the one value the original was built with at every case
    of the task, where it is a number or a bool."""
    bad = find_unknown(value)
    if bad is None or not bad.what.startswith("host template parameter"):
        return value
    names = [t.name for t in job.info.template_params]
    launches = job.task.original.launches
    i = names.index(name) if name in names else len(names)
    values = {_literal(launch.template[i], job) for launch in launches if i < len(launch.template)}
    got = values.pop() if len(values) == 1 else None
    if not isinstance(got, int):
        return value
    note = f"template {name} = {got}, as the original is built at every case"
    job.notes += [note] if note not in job.notes else []
    return ast.Constant(got)


def _values(plan: LaunchPlan) -> str:
    return (
        ast.dump(ast.Tuple([*plan.blocks, *plan.threads, plan.smem or ast.Constant(0)]))
        + str(sorted((k, ast.dump(v)) for k, v in plan.targs.items()))
        + str(
            sorted(
                (k, ast.dump(v) if isinstance(v, ast.AST) else str(v))
                for k, v in plan.kargs.items()
            )
        )
    )


def _reproduces(job: KernelJob, plan: LaunchPlan, case: dict) -> bool:
    """The launch values at `case` are those the original's launch had there."""
    task = job.task
    launch = task.original.launch(task.case_label(case))
    names = case_infos(task, case, task.dtypes[0])
    kinds = {t.name: t.kind for t in job.info.template_params}
    want: list[tuple[ast.expr | None, object, bool]] = [
        *zip(plan.blocks, launch.grid, [False] * 3, strict=True),
        *zip(plan.threads, launch.block, [False] * 3, strict=True),
        (plan.smem, launch.shared_bytes, False),
    ]
    for i, tp in enumerate(job.info.template_params):
        if tp.kind != "typename" and tp.name in plan.targs and i < len(launch.template):
            want.append(
                (plan.targs[tp.name], _literal(launch.template[i], job), kinds[tp.name] == "bool")
            )
    try:
        for e, value, boolean in want:
            got = 0 if e is None else to_expr(lower(e, want_bool=boolean))
            if evaluate(got, names) != value:
                return False
    except (CExprError, ExprError, ValueError, KeyError):
        return False
    return True


def _literal(text: str, job: KernelJob) -> object:
    """A template argument as the value it is: a bool, a number, an enumerator's number."""
    t = text.strip()
    if (value := enumerators(job.root).get(t)) is not None:
        return value
    if t in ("true", "false"):
        return t == "true"
    try:
        return int(t.rstrip("uUlL"), 0)
    except ValueError:
        return t


def _unknown(got: LaunchPlan) -> Untranslatable | None:
    """The first launch value the host code leaves unknown, as the error it would raise."""
    for what, e in [
        *(("grid size " + a, b) for a, b in zip("xyz", got.blocks, strict=True)),
        *(("block size " + a, t) for a, t in zip("xyz", got.threads, strict=True)),
        ("the dynamic shared-memory size", got.smem),
        *got.targs.items(),
    ]:
        if e is None:
            continue
        try:
            launch_expr(e, what, got.line)
        except Untranslatable as err:
            return err
    return None


def launch_expr(
    e: ast.expr | None, what: str, ln: int, want_bool: bool = False
) -> str | int | bool:
    bad = find_unknown(e)
    if bad is not None:
        raise Untranslatable(
            bad.what,
            bad.line or ln,
            f"needed for {what}, and it cannot be expressed over the task's inputs and params",
        )
    try:
        return to_expr(lower(e, want_bool=want_bool))
    except CExprError as err:
        raise Untranslatable(err.what, ln, f"needed for {what}") from None


def templates(job: KernelJob, plan: LaunchPlan) -> tuple[Template, list[str | int]]:
    """The template values, and the block size (an int, or the template name holding it) per
    axis."""
    template: Template = {}
    for tp in job.info.template_params:
        if tp.kind == "typename":
            t = typename_tensor(job, tp.name)
            fixed = None if t is not None else typename_dtype(job, tp.name)
            if t is None and fixed is None:
                raise Untranslatable(
                    f"template parameter {tp.name}",
                    job.info.line,
                    "no kernel pointer of this type is bound to a task input",
                )
            template[tp.name] = f"{t}.dtype" if t is not None else fixed
        elif tp.kind == "template":
            raise Untranslatable(
                f"template template parameter {tp.name}", job.info.line, "not supported"
            )
        elif not _value_template(job, plan, tp.name, tp.kind, tp.default, template):
            continue
        job.bindings[f"template {tp.name}"] = str(template[tp.name])
    return template, _block(job, plan, template)


def _value_template(
    job: KernelJob, plan: LaunchPlan, name: str, kind: str, default: str | None, template: Template
) -> bool:
    """Set a non-type template parameter from the launch; False when it became a body constant."""
    value = plan.targs.get(name)
    if value is None and default:
        value = ast.parse(default, mode="eval").body if default.isdigit() else None
    if value is None:
        raise Untranslatable(
            f"template parameter {name}", job.info.line, "the launch does not set it"
        )
    got = launch_expr(value, f"template parameter {name}", plan.line, kind == "bool")
    if kind == "bool" and isinstance(got, str) and got in job.binder.params:
        # backends see params as 0-d arrays, so a template cannot read one: a body constant can
        job.param_consts.append((name, got))
        job.bindings[f"template {name}"] = got
        job.notes.append(
            f"template bool {name} follows param {got}: it became a body constant "
            f"`const bool {name} = {got};`"
        )
        return False
    template[name] = got
    return True


def _block(job: KernelJob, plan: LaunchPlan, template: Template) -> list[str | int]:
    block: list[str | int] = []
    for axis, e in zip("XYZ", plan.threads, strict=True):
        v = launch_expr(e, f"block size {axis.lower()}", plan.line)
        if isinstance(v, int):
            block.append(v)
            continue
        same = [k for k, tv in template.items() if tv == v]
        name = same[0] if same else job.fresh_name(f"BLOCK_DIM_{axis}", set(template))
        template[name] = v
        block.append(name)
        job.notes.append(
            f"blockDim.{axis.lower()} fixed at the launch's block size as template {name} = {v}"
        )
    for axis, v in zip("xyz", block, strict=True):
        if isinstance(v, int) and v != 1 and job.target == "msl":
            job.notes.append(f"blockDim.{axis} fixed to {v} (the launch's block size)")
    return block


def grid(job: KernelJob, plan: LaunchPlan, block: list[str | int]) -> tuple[list, list]:
    """The grid in threads and the threadgroup size."""
    grid, tg = [], []
    for axis, (b, t) in enumerate(zip(plan.blocks, block, strict=True)):
        nb = launch_expr(b, f"grid size {'xyz'[axis]}", plan.line)
        nb_ast = ast.parse(str(nb), mode="eval").body
        t_ast = ast.Constant(t) if isinstance(t, int) else ast.Name(t)
        grid.append(to_expr(simplify(ast.BinOp(nb_ast, ast.Mult(), t_ast))))
        tg.append(t)
    job.notes.append(
        "grid = blocks x block size in threads (MLX counts threads), so every threadgroup is "
        "full and gridDim = threadgroups_per_grid"
    )
    return grid, tg


def dynamic_shared(
    job: KernelJob, plan: LaunchPlan, template: Template, facts: KernelFacts, sizes: TypeSizes
) -> tuple[str, str | int]:
    """A note on how `extern __shared__` is sized, and the bytes the launch passes (0 without one).

    MSL: the array becomes fixed-size (`facts.dynamic`), from a template when the size varies."""
    decls = [s for s in job.info.shared if s.dynamic]
    for d in job.cf.device_functions:
        if d.name in job.helpers:
            decls += [s for s in d.shared if s.dynamic]
    if not decls:
        return "", 0
    if plan.smem is None:
        raise Untranslatable(
            f"extern __shared__ {decls[0].name}[]",
            decls[0].line,
            "the launch passes no dynamic shared-memory size",
        )
    smem = launch_expr(plan.smem, "the dynamic shared-memory size", plan.line)
    if len({d.name for d in decls}) > 1:
        raise Untranslatable(
            f"extern __shared__ {decls[1].name}[]",
            decls[1].line,
            "several dynamic shared arrays alias one buffer",
        )
    d = decls[0]
    count = launch_expr(
        ast.BinOp(plan.smem, ast.FloorDiv(), _element_size(d, sizes)),
        "the dynamic shared-memory size",
        plan.line,
    )
    if job.target == "cuda":
        return (
            f"extern __shared__ {d.name}[]: shared_memory = {smem} bytes, as the launch passes",
            smem,
        )
    if isinstance(count, int):
        facts.dynamic[d.name] = str(count)
        return f"extern __shared__ {d.name}[] sized from the launch: {count} elements", smem
    name = job.fresh_name(f"SMEM_{d.name.upper()}", set(template))
    template[name] = count
    facts.dynamic[d.name] = name
    return (
        f"extern __shared__ {d.name}[] sized from the launch's {smem} bytes: "
        f"template {name} = {count}",
        smem,
    )


def _element_size(d: SharedDecl, sizes: TypeSizes) -> ast.expr:
    size = TYPE_SIZES.get(d.type)
    if size is not None:
        return ast.Constant(size)
    tsz = sizes(d.type)
    if tsz is None:
        raise Untranslatable(
            f"extern __shared__ {d.type} {d.name}[]", d.line, "unknown element size"
        )
    return atom(ast.unparse(tsz))
