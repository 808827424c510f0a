"""Reading CUDA: a .cu file parsed with tree-sitter into what the rest of mlxport asks of it.

`reader.read_cuda` is the entry: the kernels and device functions (`declarations`, `structure`),
how each parameter is read and written (`param_access`), the intrinsics and constructs used
(`feature_scan`, with their Metal notes in `features`), macros and local headers (`macros`,
`includes`), the launches in the host code (`host_code`). `calls` is the one table of what each
CUDA function becomes in Metal (a rule the translator writes, a refusal, or a hint), which the
notes and the translator both read; `names` holds the types and Metal's reserved words. Nothing
here evaluates or renders.
"""
