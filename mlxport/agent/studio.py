"""The graph LangGraph Studio and ``langgraph dev`` load (see langgraph.json and docs/studio.md).

Compiled without a checkpointer: the LangGraph server brings its own persistence and refuses a
graph that has one. The model comes from the run's context (``RunConfig.model``), as in a port.
"""

from mlxport.agent.graph import build_graph

graph = build_graph()
