"""The tree-sitter helpers of mlxport/cuda_syntax.py that every room reads declarations with."""

import pytest

from mlxport.cuda_syntax import declared_name, parse, parser, reading_source, walk

SHAPES = [
    ("float x;", "x"),
    ("float* p;", "p"),
    ("const float* __restrict__ p;", "p"),
    ("float** pp;", "pp"),
    ("float a[4][8];", "a"),
    ("float& r = y;", "r"),
    ("int n = 3;", "n"),
    ("float* q = x + 1;", "q"),
    ("void f(int n);", "f"),
    ("float* g(int n);", "g"),
    ("void (*fp)(int);", "fp"),
    ("int Foo::count = 0;", "Foo::count"),
]


def _declarator(source: str):
    root = parse(source.encode()).root_node
    decl = next(n for n in walk(root) if n.type == "declaration")
    return decl.child_by_field_name("declarator")


@pytest.mark.parametrize(("source", "name"), SHAPES)
def test_declared_name_of_each_declarator_shape(source, name):
    assert declared_name(_declarator(source)) == name


@pytest.mark.parametrize(("source", "name"), SHAPES)
def test_declared_name_reads_a_callback_parsed_tree_inside_reading_source(source, name):
    data = source.encode()
    root = parser().parse(lambda at, _point: data[at : at + 2048]).root_node
    decl = next(n for n in walk(root) if n.type == "declaration")
    with reading_source(data):
        assert declared_name(decl.child_by_field_name("declarator")) == name


def _params(source: str):
    root = parse(source.encode()).root_node
    plist = next(n for n in walk(root) if n.type == "parameter_list")
    return [p for p in plist.named_children if p.type.endswith("parameter_declaration")]


def test_declared_name_of_parameters_named_and_not():
    params = _params(
        "void f(const float* x, int& n, float v[], float (&rows)[4], int (*cb)(int), int,"
        " const float*, Args&&... rest);"
    )
    assert [declared_name(p) for p in params] == ["x", "n", "v", "rows", "cb", "", "", "rest"]
    # an unnamed array parameter names nothing, not the name in its size
    assert declared_name(_params("void g(float[N]);")[0]) == ""


def test_declared_name_of_members_templates_and_operators():
    root = parse(
        b"struct S { float m; float* mp; int& ref; float op(int); };\n"
        b"template <> __device__ float h<float>(float x) { return x; }\n"
        b"struct T { T operator+(T o); };"
    ).root_node
    names = [
        declared_name(n.child_by_field_name("declarator"))
        for n in walk(root)
        if n.type in ("field_declaration", "function_definition")
    ]
    assert names == ["m", "mp", "ref", "op", "h<float>", "operator+"]
    assert declared_name(None) == ""
