"""A batch on a Ray cluster: each port a Ray task needing one unit of its backend's resource."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mlxport.batch import Event, EventLog, port_job, summary_row
from mlxport.batch.jobs import Job
from mlxport.errors import UserError


def run_on_ray(
    job_list: list[Job], out: Path, address: str, log: EventLog, jobs: int = 1
) -> list[dict[str, Any]]:
    """Each port as a Ray task that needs one unit of the custom resource named after its backend
    (``sim``, ``metal``, ``cuda``), so it lands on a node that offers that backend. ``out`` must
    be a folder every node sees (a shared filesystem) for resume and skip to work across runs.
    ``local`` starts a throwaway cluster on this machine offering ``jobs`` units of each backend."""
    auto = sorted({j.name for j in job_list if j.backend == "auto"})
    if auto:
        raise UserError(
            f"with --ray pick the backend (budget backend=metal, cuda or sim) so ports go to nodes "
            f"with "
            f"that resource; {', '.join(auto[:3])} use auto"
        )
    try:
        import ray
    except ImportError as e:
        raise UserError(
            "--ray needs Ray, which is not installed: pip install 'mlxport[ray]'"
        ) from e
    owned = not ray.is_initialized()
    if owned:
        if address != "local":
            _match_ray_auth()
        local = {"resources": {j.backend: jobs for j in job_list}} if address == "local" else {}
        ray.init(address=address, log_to_driver=False, **local)
    try:
        offered = ray.cluster_resources()
        for backend in sorted({j.backend for j in job_list}):
            if offered.get(backend, 0) < 1:
                raise UserError(
                    f"no node of the Ray cluster at {address} offers the {backend!r} resource: "
                    f"start one "
                    f"with ray start --resources='{{\"{backend}\": 1}}'"
                )
        if any(j.backend == "cuda" for j in job_list) and offered.get("GPU", 0) < 1:
            raise UserError(
                f"the Ray cluster at {address} offers 'cuda' but no GPU: start its GPU nodes with "
                f"ray start --num-gpus=N"
            )
        remote = ray.remote(_ray_port)
        refs = {}
        for j in job_list:
            # A CUDA port holds one GPU of its own: Ray sets the worker's CUDA_VISIBLE_DEVICES to
            # it, while the simulator checks and compiles use the node's CPUs.
            gpus = 1 if j.backend == "cuda" else 0
            ref = remote.options(
                resources={j.backend: 1}, num_cpus=1, num_gpus=gpus, name=f"port:{j.name}"
            ).remote(asdict(j), str(out))
            refs[ref] = j
            log.emit(j.name, "submitted", resource=j.backend)
        rows = []
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=1.0)
            for ref in ready:
                job = refs.pop(ref)
                try:
                    row, last = ray.get(ref)
                except Exception as e:  # the worker died or could not import mlxport
                    row = summary_row(
                        job.name, "failed", None, error=f"{type(e).__name__}: {str(e)[:300]}"
                    )
                    log.emit(job.name, "error", error=row["error"])
                else:
                    log.forward(last)  # the worker already wrote it to the log
                rows.append(row)
        return rows
    finally:
        if owned:
            ray.shutdown()


def _match_ray_auth() -> None:
    """``ray start`` turns token authentication on when a token exists (~/.ray/auth_token,
    RAY_AUTH_TOKEN) but ``ray.init(address=...)`` does not (Ray 2.60): send the token as well."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # another Ray version: its own defaults apply
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _ray_port(job: dict[str, Any], out: str) -> tuple[dict[str, Any], Event]:
    """Runs on a Ray worker: the same job as in the thread pool; events go to the shared log."""
    import ray

    events: list[Event] = []
    log, one = EventLog(Path(out), events.append), Job(**job)
    if one.backend == "cuda":
        log.emit(
            one.name,
            "placed",
            gpus=[str(g) for g in ray.get_gpu_ids()],
            visible=os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        )
    row = port_job(one, Path(out), log)
    return row, events[-1]
