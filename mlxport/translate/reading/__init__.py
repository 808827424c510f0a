"""Reading CUDA: a .cu file parsed with tree-sitter into what the rest of mlxport asks of it.

`reader.read_cuda` is the entry: the kernels and device functions (`declarations`, `structure`),
how each parameter is read and written (`param_access`), the intrinsics and constructs used
(`feature_scan`, with their Metal notes in `features`), macros and local headers (`macros`,
`includes`), the launches in the host code (`host_code`), and `names`, the one table of what
each CUDA name becomes in Metal. Nothing here evaluates or renders.
"""
