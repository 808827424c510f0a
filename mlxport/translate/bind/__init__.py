"""A kernel bound to a task: what a translation is of, before any rendering.

`job.KernelJob` holds the kernel's tree, the task and what the steps record. Its pointers are
bound to the task's tensors (`ports`), its scalars to params or launch values (`scalars`), its
launch turned into the candidate's grid, threadgroup and shared memory (`launch_config`, or
`launch_fit` from the launches a task recorded), the per-kernel decisions renderers follow
(`kernel_facts`), the device code it reaches and the constructs no rule covers (`kernel_scope`).
`result` is what a translation returns and the error for what it cannot translate.
"""
