"""A worker target (``tests.workers.probe:handle``) that tries, from inside a worker, what hostile
candidate code would: read the environment, start processes, see where it runs."""

import os


def handle(header: dict, arrays: list) -> tuple[dict, list]:
    op = header["op"]
    if op == "env":
        return {"env": sorted(os.environ), "cwd": os.getcwd()}, []
    if op == "fork":
        try:
            pid = os.fork()
        except OSError as e:
            return {"refused": f"{type(e).__name__}: {e}"}, []
        if pid == 0:
            os._exit(0)
        return {"forked": pid}, []
    if op == "system":  # what a static initializer calling system("touch ...") does
        return {"status": os.system(f"touch {header['path']}")}, []
    if op in ("read", "write"):  # a file outside what the worker may touch
        try:
            if op == "read":
                with open(header["path"]) as f:
                    return {"done": f.read()}, []
            with open(header["path"], "w") as f:
                f.write("pwned")
            return {"done": "written"}, []
        except OSError as e:
            return {"refused": f"{type(e).__name__}: {e}"}, []
    if op == "spin":
        while True:
            pass
    raise ValueError(op)
