"""Rendering: a bound kernel's tree written out as a candidate's body in a target language.

`base` replaces nodes of the tree with their rendering (shared by both targets). Metal:
`msl_kernel` (the body and header), `msl_render` (statements and expressions), `msl_helpers`
(device functions), `msl_declarators` and `msl_spaces` (types and address spaces), `msl_warp` and
`msl_groups` (warp collectives and cooperative groups as SIMD-group functions). CUDA for MLX's
`cuda_kernel`: `cuda_kernel`.
"""
