"""langgraph.json points at a compiled graph that LangGraph Studio / `langgraph dev` can load."""

import importlib
import json
from pathlib import Path

from langgraph.graph.state import CompiledStateGraph

ROOT = Path(__file__).resolve().parents[1]


def test_langgraph_json_resolves_to_the_studio_graph():
    config = json.loads((ROOT / "langgraph.json").read_text())
    assert config["dependencies"] == ["."]
    target = config["graphs"]["mlxport"]["path"]
    file, _, attr = target.partition(":")
    path = (ROOT / file).resolve()
    assert path.is_file(), target
    module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
    graph = getattr(module, attr)
    assert isinstance(graph, CompiledStateGraph)
    assert graph.checkpointer is None, (
        "langgraph dev refuses a graph compiled with its own checkpointer"
    )
    assert {"prepare", "reason", "tools", "assess", "finalize"} <= set(graph.get_graph().nodes)
    assert graph.context_schema.__name__ == "RunConfig"
