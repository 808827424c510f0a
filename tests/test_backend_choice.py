import pytest

from mlxport import backends
from mlxport.backends.base import Availability, BackendUnavailable


@pytest.mark.parametrize(
    ("running", "chosen"),
    [({"metal", "cuda", "sim"}, "metal"), ({"cuda", "sim"}, "cuda"), (set(), "sim")],
)
def test_auto_is_the_first_gpu_backend_that_runs_here_else_the_simulator(
    monkeypatch, running, chosen
):
    monkeypatch.setattr(backends, "_status", lambda name: Availability(name in running, "test"))
    backends._auto.cache_clear()
    try:
        assert backends.resolve("auto") == chosen
        assert backends.resolve("cuda") == "cuda"  # a name the user gave is kept, running or not
        with pytest.raises(BackendUnavailable, match="unknown backend 'gpu'"):
            backends.resolve("gpu")
    finally:
        backends._auto.cache_clear()  # the next caller asks this machine again
