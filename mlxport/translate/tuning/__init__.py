"""Tuning: variants of a translation, each checked like any candidate, for the rules policy's
search on a backend that times kernels.

`variants` lists them (restrict pointers, unrolls, launch integers) and builds each one;
`vectorize` rewrites stride loops to move several elements per vector load or store, from the
facts `vector_facts` proves about them; `ifconvert` turns branches that update float scalars
into selects.
"""
