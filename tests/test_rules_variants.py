"""The rules policy's tuning search: other values of the source's #defines, each a candidate that
must pass its checks; one that fails is dropped and the search goes on."""

from langchain_core.messages import AIMessage, ToolMessage

from mlxport.agent.rules import decide
from mlxport.spec import KernelCandidate
from mlxport.tasks import load_task
from mlxport.translate.variants import tuning_variants


def test_variants_vary_the_defines_but_not_the_warp_size_block_define_first():
    labels = [label for label, _ in tuning_variants(load_task("cumsum"), "cuda")]
    assert labels[0].startswith("SCAN_BLOCK=") and "SCAN_ITEMS=8" in labels
    assert not any(label.startswith("WARP") for label in labels)
    blocks = [int(label.split("=")[1]) for label in labels if label.startswith("SCAN_BLOCK=")]
    assert 256 not in blocks and max(blocks) <= 1024  # 256 is the source's own value
    ids = {t.candidate.id for _, t in tuning_variants(load_task("cumsum"), "cuda")}
    assert len(ids) == len(labels)


def test_constexpr_block_sizes_and_launch_literals_vary_too_never_as_the_translation_itself():
    from mlxport.translate.translator import translate_task

    rms = [label for label, _ in tuning_variants(load_task("rmsnorm"), "cuda")]
    assert "BLOCK=512" in rms  # constexpr int BLOCK = 256; in both host launchers
    softmax = tuning_variants(load_task("softmax_rows"), "cuda")
    assert any(label.startswith("block@") for label, _ in softmax)  # softmax_rows_kernel<T, 512><<<rows, 512>>>
    base = translate_task(load_task("softmax_rows"), "cuda").candidate.id
    assert base not in {t.candidate.id for _, t in softmax}


def play(task, wrong: int):
    """Drive the policy with scripted tool outcomes; the wrong-th compiled candidate fails its check.
    Returns what it said at each compile, the turns taken, and the finish summary."""
    messages, compiles, ids = [], [], {}
    for turn in range(60):
        text, calls = decide(messages)
        if calls[0][0] == "finish":
            return compiles, turn, calls[0][1]["summary"]
        answers = []
        for i, (name, args) in enumerate(calls):
            if name == "read_cuda_source":
                outcome = {"task_dir": str(task.folder), "language": "cuda"}
            elif name == "compile_kernel":
                compiles.append(text)
                cid = KernelCandidate.model_validate({"language": "cuda", **args}).id  # as the tool names it
                ids[cid] = len(compiles)
                outcome = {"compiled": True, "candidate_id": cid}
            elif name == "run_correctness":
                outcome = {"correct": ids[args["candidate_id"]] != wrong, "candidate_id": args["candidate_id"]}
            elif name == "benchmark":
                ok = ids[args["candidate_id"]] != wrong
                outcome = {"timed": True, "candidate_id": args["candidate_id"]} if ok else {"error": "not correct"}
            else:
                outcome = {}
            answers.append((f"t{turn}_{i}", name, args, outcome))
        messages.append(AIMessage(text, tool_calls=[{"name": n, "args": a, "id": c, "type": "tool_call"}
                                                    for c, n, a, _ in answers]))
        messages += [ToolMessage("", tool_call_id=c, artifact=o) for c, _, _, o in answers]
    raise AssertionError("the policy did not finish")


def test_a_variant_that_fails_its_check_is_dropped_and_the_search_goes_on():
    """Each variant is one turn (compile, check and time the same id), so the default budget of 12
    turns reaches five after the translation's seven."""
    task = load_task("layernorm")
    variants = tuning_variants(task, "cuda")
    compiles, turns, summary = play(task, wrong=2)
    assert len(compiles) == 1 + len(variants) == 5 and turns == 7 + len(variants)
    assert compiles[1] == f"Trying the translation with {variants[0][0]}." and "tuning variants" in summary


def test_the_translation_itself_failing_ends_the_search():
    compiles, turns, summary = play(load_task("layernorm"), wrong=1)
    assert len(compiles) == 1 and "not correct" in summary
