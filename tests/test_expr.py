import pytest

from mlxport.expr import ArrayInfo, Dtype, ExprError, as_shape, evaluate, names_used

X = ArrayInfo((4, 1000), Dtype("float16"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ceildiv(x.size, 256) * 256", 4096),
        ("x.shape[1] // 4 + x.shape[-2]", 254),
        ("min(1024, max(32, x.shape[1]))", 1000),
        ("x.dtype", Dtype("float16")),
        ("float32", Dtype("float32")),
        ("x.itemsize * x.size", 8000),
        ("-x.ndim % 3", 1),
        ("(x.shape[0], 2 * N)", (4, 14)),
        (128, 128),
    ],
)
def test_evaluates_the_allowed_language(text, expected):
    assert evaluate(text, {"x": X, "N": 7}) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("x.__class__", "attribute .__class__ is not allowed"),
        ("__import__('os').system('touch ' + PWNED)", "not allowed"),
        ("().__class__.__bases__[0].__subclasses__()", "not allowed"),
        ("open('/etc/passwd').read()", "calls are not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("[i for i in range(10**9)]", "ListComp is not allowed"),
        ("{i: i for i in range(3)}", "DictComp is not allowed"),
        ("(i for i in range(3))", "GeneratorExp is not allowed"),
        ("2 ** 10 ** 10", "Pow is not allowed"),
        ("9" * 40, "constant"),
        ("-" * 200 + "1", "deeper than"),
        ("[" * 100 + "]" * 100, "deeper than"),
        ("+".join(["1"] * 600), "characters; the limit"),
        ("1 + " * 30 + "1", "deeper than"),
        ("x if 1 else 2", "IfExp is not allowed"),
        ("_secret", "name '_secret' is not allowed"),
        ("x.shape.count(1)", "not allowed"),
        ("'abc' * 10", "constant 'abc' is not allowed"),
        ("a := 3", "not a valid expression"),
        ("1; import os", "not a valid expression"),
        ("x[0:2]", "Slice is not allowed"),
        ("min(x=1)", "not allowed"),
    ],
)
def test_refuses_hostile_strings_with_a_clear_message(text, fragment, tmp_path):
    pwned = tmp_path / "pwned"
    with pytest.raises(ExprError, match=None) as info:
        evaluate(text, {"x": X, "PWNED": str(pwned)})
    assert fragment in str(info.value)
    assert not pwned.exists()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("y.size", "unknown name 'y'"),
        ("x.shape[5]", "out of range"),
        ("ceildiv(4, 0)", "by zero"),
        ("x.size // 0", "division by zero"),
        ("N.shape", "needs an input array"),
        ("x.dtype + 1", "arithmetic needs numbers"),
        ("min(x.size)", "min() takes 2 to 8 arguments"),
        ("ceildiv(4)", "ceildiv() takes 2 arguments"),
        ("2**40 * 2**40 * 2**40", "Pow is not allowed"),
        ("4611686018427387904 * 4", "too large"),
    ],
)
def test_evaluation_errors_are_clear(text, fragment):
    with pytest.raises(ExprError) as info:
        evaluate(text, {"x": X, "N": 3})
    assert fragment in str(info.value)


def test_shapes_and_names():
    assert as_shape(["B", "T * 2"], {"B": 2, "T": 3}, "s") == (2, 6)
    assert as_shape("x.shape", {"x": X}, "s") == (4, 1000)
    assert names_used("ceildiv(T, BLOCK) * H") == {"T", "BLOCK", "H"}
    with pytest.raises(ExprError, match="non-negative"):
        as_shape(["-B"], {"B": 2}, "s")
