"""The wild corpus: real CUDA kernels from public projects (benchmarks/wild/manifest.toml), each
read, run on the CPU executor at its case and ported with the default policy on the simulator.

The kernels' code is not in this repository: it is read from repository snapshots fetched with the
search tool's fetch (a bare git dir per repository, OWNER+NAME/repo under the folder given).

    python benchmarks/wild.py /work/.mirror [--only ID,...] [--stages read,run,port,op]
        [--out DIR] [--manifest F] [--jobs N]

Stage ``op`` calls a verified port's written kernel.py as a user would, at sizes drawn afresh, and
compares it with the original: "op correct". Writes DIR/wild.json (per kernel: parsed, executed,
translated, verified, op_correct, reason, seconds) and DIR/wild.md (the table and totals, per
project too), both after every kernel.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import tomllib
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlxport.errors import UserError  # noqa: E402

MANIFEST = ROOT / "benchmarks" / "wild" / "manifest.toml"
SOURCES = (".cu", ".cuh", ".h", ".hpp", ".hh", ".inl", ".c", ".cpp", ".cc")


def snapshot(mirror: Path, repo: str, commit: str, work: Path) -> Path:
    """The repository's source files at ``commit``, written once under ``work`` (snapshots lack
    their largest files, so the sources are read one by one rather than archived)."""
    git = mirror / repo.replace("/", "+") / "repo"
    if not git.is_dir():
        raise FileNotFoundError(f"no snapshot of {repo} under {mirror}: fetch github:{repo}")
    dest = work / f"{repo.replace('/', '+')}-{commit[:12]}"
    if not (dest / ".unpacked").is_file():
        names = subprocess.run(
            ["git", "-C", str(git), "ls-tree", "-r", "--name-only", commit],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        wanted = [n for n in names if n.endswith(SOURCES)]
        batch = subprocess.run(
            ["git", "-C", str(git), "cat-file", "--batch"],
            capture_output=True,
            check=True,
            input="".join(f"{commit}:{n}\n" for n in wanted).encode(),
        ).stdout
        pos = 0
        for name in wanted:
            header_end = batch.index(b"\n", pos)
            header = batch[pos:header_end].split()
            pos = header_end + 1
            if len(header) < 3 or header[1] != b"blob":
                continue  # missing from the snapshot
            size = int(header[2])
            out = dest / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(batch[pos : pos + size])
            pos += size + 1
        (dest / ".unpacked").write_text("")
    return dest


def with_defines(src: Path, defines: list[str], work: Path) -> Path:
    """A copy of the file beside it with its own #defines of these names set to the
    manifest's values."""
    text = src.read_text(errors="replace")
    for item in defines:
        name, _, value = item.partition("=")
        text, n = re.subn(
            rf"(?m)^(\s*#\s*define\s+{re.escape(name)}\s+).*$", rf"\g<1>{value}", text
        )
        if not n:
            text = f"#define {name} {value}\n" + text
    out = src.with_name(f"_wild_{src.name}")
    out.write_text(text)
    return out


def stage_read(path: Path, entry: dict, root: Path) -> dict:
    from mlxport.translate.reading.includes import amalgamate
    from mlxport.translate.reading.reader import read_cuda

    text, _, _ = amalgamate(path, [root / i for i in entry.get("includes", [])])
    cf = read_cuda(text, name=path.name)
    if entry["kernel"] not in [k.name for k in cf.kernels]:
        return {
            "parsed": False,
            "reason": f"the reader finds no kernel {entry['kernel']} in {path.name}",
        }
    return {"parsed": True}


def stage_task(path: Path, entry: dict, root: Path, folder: Path):
    from mlxport.tasks.make import TaskRequest, from_cuda, write_task

    request = TaskRequest.of(
        source=path,
        kernel=entry["kernel"],
        cases=[entry["case"]],
        dtypes=entry.get("dtypes"),
        shapes=entry.get("shapes", []),
        inputs=entry.get("domains"),
        grid=entry.get("grid"),
        block=entry.get("block"),
        shared_bytes=entry.get("shared_bytes"),
        template=entry.get("template"),
        includes=[root / i for i in entry.get("includes", [])],
    )
    return write_task(from_cuda(request, heldout=2), folder, path)


def load_name(folder: Path) -> str:
    return tomllib.loads((folder / "task.toml").read_text())["name"]


def stage_port(folder: Path, out: Path) -> dict:
    from mlxport.agent.port import run_port
    from mlxport.agent.state import RunConfig
    from mlxport.tasks import load_task
    from mlxport.translate.translator import Untranslatable, translate_task

    task = load_task(folder)
    try:
        translate_task(task, "msl")
        translated = True
    except Untranslatable as e:
        return {"translated": False, "verified": False, "reason": str(e)}
    run = run_port(task, RunConfig(backend="sim"), out)
    res = run["result"]
    return {
        "translated": translated,
        "verified": res["verified"],
        "reason": res.get("why_not") or "",
    }


OP_SEED = 7_000_001  # the op stage's sizes and inputs: none the port's own check drew


def stage_op(folder: Path, port: Path) -> dict:
    """The written kernel.py of a verified port (``port``: its OUT/<task> folder) at 3 sizes drawn
    afresh, the paths of its candidate the sizes reach, and every dtype it was verified in, against
    the original kernel on the CPU executor (the task in ``folder``)."""
    from mlxport.backends import get_backend
    from mlxport.op.check import check_op, golden_cases
    from mlxport.tasks import load_candidate, load_task
    from mlxport.tools.final import op_cases

    task = load_task(folder)
    candidate = load_candidate(port / "candidate.toml")
    found = op_cases(task, candidate, OP_SEED)
    if found.unreached:
        return {"op_correct": False, "op_reason": found.unreached[0]}
    goldens = golden_cases(found.task, found.fresh, OP_SEED)
    goldens += golden_cases(found.task, found.paths, OP_SEED + 1, found.task.dtypes[:1])
    results = check_op(port, found.task, get_backend("sim"), goldens)
    # a size the op's own contract refuses in one sentence (its requires, from the port's op
    # check at another seed) is not a wrong answer
    refused = [r for r in results if "was verified where" in (r.error or "")]
    bad = next((r for r in results if r.verdict != "pass" and r not in refused), None)
    if bad is None:
        return {"op_correct": True, **({"op_refused": len(refused)} if refused else {})}
    return {"op_correct": False, "op_reason": f"{bad.case} {bad.dtype}: {bad.error or bad.pattern}"}


def run_entry(entry: dict, mirror: Path, out: Path, stages: set[str]) -> dict:
    """One kernel through ``stages``: its row of the table."""
    t0 = time.perf_counter()
    row = {
        "id": entry["id"],
        "parsed": False,
        "executed": False,
        "translated": False,
        "verified": False,
        "op_correct": False,
        "reason": "",
    }
    try:
        root = snapshot(mirror, entry["repo"], entry["commit"], out / "src")
        path = root / entry["path"]
        if entry.get("defines"):
            path = with_defines(path, entry["defines"], out / "src")
        row.update(stage_read(path, entry, root))
        if "run" in stages:
            folder = stage_task(path, entry, root, out / "tasks" / re.sub(r"\W", "_", entry["id"]))
            row["executed"] = True
            if "port" in stages:
                row.update(stage_port(folder, out / "ports"))
            if "op" in stages and row["verified"]:
                row.update(stage_op(folder, out / "ports" / load_name(folder)))
    except UserError as e:
        row["reason"] = str(e)
    except Exception as e:  # a crash is a finding too: recorded, the corpus goes on
        row["reason"] = (
            f"{type(e).__name__}: {e} | {traceback.format_exc().splitlines()[-3].strip()}"
        )
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mirror", type=Path, help="folder of fetched snapshots (OWNER+NAME/repo)")
    ap.add_argument("--only", help="comma-separated ids")
    ap.add_argument("--stages", default="read,run,port,op")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "wild")
    ap.add_argument("--manifest", type=Path, default=MANIFEST)
    ap.add_argument("--jobs", type=int, default=1, help="kernels run at once, each in a process")
    args = ap.parse_args()
    entries = tomllib.loads(args.manifest.read_text())["kernel"]
    if args.only:
        wanted = set(args.only.split(","))
        entries = [e for e in entries if e["id"] in wanted]
    stages = set(args.stages.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    for repo, commit in dict.fromkeys((e["repo"], e["commit"]) for e in entries):
        snapshot(args.mirror, repo, commit, args.out / "src")  # once, before the workers read it
    order = {e["id"]: i for i, e in enumerate(entries)}
    rows: list[dict] = []
    with ProcessPoolExecutor(args.jobs) as pool:
        running = [pool.submit(run_entry, e, args.mirror, args.out, stages) for e in entries]
        for done in as_completed(running):
            row = done.result()
            rows.append(row)
            rows.sort(key=lambda r: order[r["id"]])
            print(
                f"{row['id']:<48} parsed={row['parsed']!s:<5} executed={row['executed']!s:<5} "
                f"verified={row['verified']!s:<5} op={row['op_correct']!s:<5} "
                f"{(row['reason'] or row.get('op_reason', ''))[:150]}",
                flush=True,
            )
            write(args.out, rows)


def write(out: Path, rows: list[dict]) -> None:
    (out / "wild.json").write_text(json.dumps(rows, indent=1))
    n = len(rows)
    keys = ("parsed", "executed", "translated", "verified", "op_correct")
    totals = {k: sum(r.get(k, False) for r in rows) for k in keys}
    lines = [
        "| kernel | parsed | executed | translated | verified | op correct | reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        why = r["reason"] or r.get("op_reason", "")
        lines.append(
            f"| {r['id']} | "
            + " | ".join("yes" if r.get(k) else "no" for k in keys)
            + f" | {why[:160].replace('|', '/')} |"
        )
    lines += [
        "",
        "totals: " + ", ".join(f"{k} {v}/{n} ({v / n:.0%})" for k, v in totals.items()),
        "",
        "op correct: the written kernel.py of a verified port, at 3 sizes drawn afresh, the paths "
        "of its candidate and every dtype it was verified in, matches the original.",
        "",
        "| project | kernels | parsed | executed | translated | verified | op correct |",
        "|---|---|---|---|---|---|---|",
    ]
    for project in dict.fromkeys(r["id"].split("/")[0] for r in rows):
        mine = [r for r in rows if r["id"].split("/")[0] == project]
        lines.append(
            f"| {project} | {len(mine)} | "
            + " | ".join(str(sum(r.get(k, False) for r in mine)) for k in totals)
            + " |"
        )
    (out / "wild.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
