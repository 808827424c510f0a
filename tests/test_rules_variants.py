"""The rules policy's tuning search: the buffers as __restrict__, unrolled stride loops and other
values of the source's tuning integers, each a candidate that must pass its checks; one that fails
is dropped and the search goes on."""

from langchain_core.messages import AIMessage, ToolMessage

from mlxport.agent.rules import decide
from mlxport.spec import KernelCandidate
from mlxport.tasks import load_task
from mlxport.translate.tuning.variants import MAX_VARIANTS, tuning_variants


def test_restrict_then_vectors_then_unroll_then_the_defines_block_first_never_the_warp_size():
    variants = tuning_variants(load_task("cumsum"), "cuda")
    labels = [label for label, _ in variants]
    # vectors: each thread's run of items
    assert labels[:5] == [
        "__restrict__",
        "vector=8 + __restrict__",
        "vector=4 + __restrict__",
        "unroll=4 + __restrict__",
        "unroll=8 + __restrict__",
    ]
    assert labels[5].startswith("SCAN_BLOCK=") and "SCAN_ITEMS=8 + __restrict__" in labels
    assert all(label.endswith("__restrict__") for label in labels)  # every CUDA variant carries it
    assert not any(label.startswith("WARP") for label in labels) and len(labels) <= MAX_VARIANTS
    blocks = [
        int(label.split("=")[1].split()[0]) for label in labels if label.startswith("SCAN_BLOCK=")
    ]
    assert 256 not in blocks and max(blocks) <= 1024  # 256 is the source's own value
    assert len({t.candidate.id for _, t in variants}) == len(labels)
    metal = [label for label, _ in tuning_variants(load_task("cumsum"), "msl")]
    assert metal[:3] == ["unroll=4", "unroll=8", "SCAN_BLOCK=64"]  # Metal: no __restrict__ knob


def test_constexpr_block_sizes_and_launch_literals_vary_too_never_as_the_translation_itself():
    from mlxport.translate.translator import translate_task

    rms = [label for label, _ in tuning_variants(load_task("rmsnorm"), "msl")]
    assert "BLOCK=512" in rms  # constexpr int BLOCK = 256; in both host launchers
    softmax = tuning_variants(load_task("softmax_rows"), "cuda")
    # softmax_rows_kernel<T, 512><<<rows, 512>>>
    assert any(label.startswith("block@") for label, _ in softmax)
    base = translate_task(load_task("softmax_rows"), "cuda").candidate.id
    assert base not in {t.candidate.id for _, t in softmax}


def test_a_value_only_a_branch_not_timed_takes_is_not_a_variant():
    """softmax_rows launches 128 threads for C <= 1024 and 512 above; it is timed at C = 4096, so
    the 128 (block@82) never varies there and only the 512 (block@84) does."""
    labels = [label for label, _ in tuning_variants(load_task("softmax_rows"), "cuda")]
    assert any(label.startswith("block@84=") for label in labels)
    assert not any(label.startswith("block@82=") for label in labels)


def play(task, wrong: int, us=lambda said: 10.0, fresh: bool = False):
    """Drive the policy with scripted tool outcomes; the wrong-th compiled candidate fails its
    check, and a timed one takes ``us(what the policy said when it compiled it)``. Returns what it
    said at each compile, the turns taken, and the finish summary. ``fresh``: every turn in a new
    process, as far as the policy knows (a resumed run)."""
    from mlxport.agent import rules

    messages, compiles, ids = [], [], {}
    for turn in range(60):
        if fresh:
            rules._search.cache_clear()
        text, calls = decide(messages)
        if calls[0][0] == "finish":
            return compiles, turn, calls[0][1]["summary"]
        answers = []
        for i, (name, args) in enumerate(calls):
            if name == "read_cuda_source":
                outcome = {"task_dir": str(task.folder), "language": "cuda"}
            elif name == "compile_kernel":
                compiles.append(text)
                # as the tool names it
                cid = KernelCandidate.model_validate({"language": "cuda", **args}).id
                ids[cid] = len(compiles)
                outcome = {"ok": True, "candidate_id": cid}
            elif name == "run_correctness":
                outcome = {
                    "ok": ids[args["candidate_id"]] != wrong,
                    "candidate_id": args["candidate_id"],
                }
            elif name == "benchmark":
                ok = ids[args["candidate_id"]] != wrong
                said = compiles[ids[args["candidate_id"]] - 1]
                outcome = (
                    {"timed": True, "us": us(said), "candidate_id": args["candidate_id"]}
                    if ok
                    else {"error": "not correct"}
                )
            else:
                outcome = {}
            answers.append((f"t{turn}_{i}", name, args, outcome))
        messages.append(
            AIMessage(
                text,
                tool_calls=[
                    {"name": n, "args": a, "id": c, "type": "tool_call"} for c, n, a, _ in answers
                ],
            )
        )
        messages += [ToolMessage("", tool_call_id=c, artifact=o) for c, _, _, o in answers]
    raise AssertionError("the policy did not finish")


def test_a_variant_that_fails_its_check_is_dropped_and_the_search_goes_on():
    """Each variant is one turn (compile, check and time the same id), so the default budget of 12
    turns reaches five after the translation's seven."""
    task = load_task("layernorm")
    variants = tuning_variants(task, "cuda")
    compiles, turns, summary = play(task, wrong=2)
    assert len(compiles) == 1 + len(variants) and len(variants) >= 5 and turns == 7 + len(variants)
    assert (
        compiles[1] == f"Trying the translation with {variants[0][0]}."
        and "tuning variants" in summary
    )


def test_the_translation_itself_failing_ends_the_search():
    compiles, turns, summary = play(load_task("layernorm"), wrong=1)
    assert len(compiles) == 1 and "not correct" in summary


def test_the_search_builds_on_the_fastest_variant_so_far():
    """rope launches dim3 block(half < 64 ? half : 64, ROWS_PER_BLOCK): both 64s are one knob. With
    a narrower block scripted fastest, the later steps (rows per block, then the vector widths and
    unroll factors again) all carry it, and the best of those carries their value too. The shared
    array's capacity (ROPE_MAX_HALF) sizes nothing else: it comes last of all."""
    task = load_task("rope")
    narrow = dict(tuning_variants(task, "cuda"))["block.x@54=16 + __restrict__"].candidate
    # was 64: the launch changed
    assert narrow.template["BLOCK_DIM_X"] == "min(x.shape[3] // 2, 16)"

    def us(said: str) -> float:
        return 50.0 - 20 * ("block.x@54=16" in said) - 10 * ("ROWS_PER_BLOCK=16" in said)

    compiles, _, summary = play(task, wrong=0, us=us)
    # a resumed run goes on where it stopped
    assert play(task, wrong=0, us=us, fresh=True)[0] == compiles
    tried = [c.removeprefix("Trying the translation with ").removesuffix(".") for c in compiles[1:]]
    assert len(set(tried)) == len(tried)
    again = tried.index("unroll=8 + block.x@54=16 + ROWS_PER_BLOCK=16 + __restrict__")
    after = tried[tried.index("block.x@54=32 + __restrict__") + 1 : again + 1]
    # the block's other dimension next
    assert after[0] == "block.x@54=16 + ROWS_PER_BLOCK=2 + __restrict__"
    assert all("block.x@54=16 + " in label for label in after)
    assert "vector=4 + block.x@54=16 + ROWS_PER_BLOCK=16 + __restrict__" in after
    # the block's sizes once more on top of all that, the source's own 64 among them
    assert tried[again + 1 : again + 4] == [
        "ROWS_PER_BLOCK=16 + __restrict__",
        "block.x@54=8 + ROWS_PER_BLOCK=16 + __restrict__",
        "block.x@54=32 + ROWS_PER_BLOCK=16 + __restrict__",
    ]
    assert (
        all("ROPE_MAX_HALF" in label for label in tried[again + 4 :]) and len(tried) == MAX_VARIANTS
    )
    assert "tuning variants" in summary


def test_capacities_are_names_only_ever_an_arrays_size():
    from mlxport.translate.tuning.variants import _capacities

    src = b"""#define CAP 256
#define ROWS 4
#define TARG 8
#define INNER 16
#define OUTER (INNER * 4)
constexpr int N = 8;
template <int M> __device__ int f(int b) { return b * M; }
__global__ void k(float* o) {
    __shared__ float a[CAP]; __shared__ float b[N]; __shared__ float c[TARG]; \
__shared__ float d[INNER];
    o[threadIdx.x % N] = a[ROWS] + f<TARG>(1) + OUTER;
}"""
    # the others are values too: in an index, a template argument, a macro
    assert _capacities(src) == {"CAP"}


def test_a_variant_slower_than_the_translation_is_not_built_on():
    from mlxport.translate.tuning.variants import Search

    search = Search(load_task("cumsum"), "msl")
    times = {"unroll=4": 30.0, "unroll=8": 20.0}
    assert search.next(times)[0] == "unroll=8 + SCAN_BLOCK=64"
    assert search.next(times, base=10.0)[0] == "SCAN_BLOCK=64"


def test_dim3_block_literals_one_knob_per_dimension_with_a_single_value():
    from mlxport.translate.tuning.variants import _dim3_literals

    def knobs(src: bytes):
        return [(name, value) for name, value, _, _ in _dim3_literals(src, "block")]

    assert knobs(b"dim3 block(half < 64 ? half : 64, ROWS);") == [("block.x@1", 64)]
    # y has two values: left alone
    assert knobs(b"dim3 block(32, (n + 31) / 32);") == [("block.x@1", 32)]
    # not the grid's
    assert knobs(b"dim3 block(256), grid((n + 255) / 256);") == [("block.x@1", 256)]
    assert knobs(b"dim3 block(f(a, 64), 8);") == [("block.x@1", 64), ("block.y@1", 8)]
