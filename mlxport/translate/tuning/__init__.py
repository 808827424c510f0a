"""Tuning: variants of a translation, each checked like any candidate, for the rules policy's
search on a backend that times kernels.

`variants` lists them (restrict pointers, unrolls, launch integers) and builds each one.
`vectorize` rewrites stride loops and a thread's runs to move several elements per vector load or
store: `vector_loops` picks the loops, `vector_accesses` their element accesses, `vector_checks`
that moving elements between threads keeps the meaning, `vector_code` writes the chunked loops;
the facts they rest on are `vector_facts` (what names hold, what depends on the thread) and
`vector_buffers` (the memory and element accessors). `ifconvert` turns branches that update float
scalars into selects. `kernel_tree` holds the tree queries they share.
"""
