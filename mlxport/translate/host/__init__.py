"""Evaluating host code: what a kernel's launch is, from the C++ that launches it.

Two evaluators share the C expression reader (`cexpr`). `evaluate` runs the host code at a
case's concrete sizes (the grid, block, shared memory and scalars a task records): `statements`
runs what comes before the launch, `expressions` gives each expression its value, `values` holds
the value types and `helpers` the calls into host functions. `launch` follows it symbolically, as
expressions over a task's inputs and params, which `binding` names (a CUDA `n` is the task's
`x.size`), for a translation's launch. Below the translator, above reading.
"""
