"""Device queries in host launch math (`deviceProp.multiProcessorCount`, `cudaDeviceGetAttribute`,
`cudaOccupancyMaxActiveBlocksPerMultiprocessor`) have no value a port can read: each is fixed at
one documented value per target, and the notes say which. They size persistent and grid-stride
grids, whose results do not depend on the grid; verification checks that they do not."""

from __future__ import annotations

import ast

from tree_sitter import Node

from mlxport.cuda_syntax import callee, text, walk

# cudaDeviceProp field -> value, per target. Metal: an M1's 8-core GPU (the smallest Apple GPU
# MLX runs on), threadgroups of at most 1024 threads and 32 KB of threadgroup memory; CUDA: an
# H100 SXM (132 SMs, 2048 threads and 228 KB of shared memory per SM).
DEVICE = {
    "msl": {
        "multiProcessorCount": 8,
        "maxThreadsPerMultiProcessor": 1024,
        "maxThreadsPerBlock": 1024,
        "warpSize": 32,
        "sharedMemPerBlock": 32768,
        "sharedMemPerBlockOptin": 32768,
        "sharedMemPerMultiprocessor": 32768,
        "maxBlocksPerMultiProcessor": 32,
    },
    "cuda": {
        "multiProcessorCount": 132,
        "maxThreadsPerMultiProcessor": 2048,
        "maxThreadsPerBlock": 1024,
        "warpSize": 32,
        "sharedMemPerBlock": 49152,
        "sharedMemPerBlockOptin": 232448,
        "sharedMemPerMultiprocessor": 233472,
        "maxBlocksPerMultiProcessor": 32,
    },
}
DEVICE_NAME = {"msl": "an M1's 8-core GPU", "cuda": "an H100 SXM"}
_ATTRIBUTES = {
    "cudaDevAttrMultiProcessorCount": "multiProcessorCount",
    "cudaDevAttrMaxThreadsPerMultiProcessor": "maxThreadsPerMultiProcessor",
    "cudaDevAttrMaxThreadsPerBlock": "maxThreadsPerBlock",
    "cudaDevAttrWarpSize": "warpSize",
    "cudaDevAttrMaxSharedMemoryPerBlock": "sharedMemPerBlock",
    "cudaDevAttrMaxSharedMemoryPerBlockOptin": "sharedMemPerBlockOptin",
    "cudaDevAttrMaxSharedMemoryPerMultiprocessor": "sharedMemPerMultiprocessor",
    "cudaDevAttrMaxBlocksPerMultiprocessor": "maxBlocksPerMultiProcessor",
}
OCCUPANCY = "cudaOccupancyMaxActiveBlocksPerMultiprocessor"


class DeviceQueries:
    """The documented values of one target, and the notes saying which were used."""

    def __init__(self, root: Node, target: str):
        self.root = root
        self.target = target if target in DEVICE else "msl"
        self.values = DEVICE[self.target]
        self.notes: list[str] = []
        self.set_by_calls: set[str] = set()  # variables a query call set (`&num_sms`)

    def field(self, name: str) -> ast.expr | None:
        """`prop.multiProcessorCount` (any variable: the field names a cudaDeviceProp's), or a
        variable the file assigns only from one such field (llm.c's `cuda_num_SMs =
        deviceProp.multiProcessorCount;` in its setup)."""
        if name == "C10_WARP_SIZE":  # PyTorch's warp size on CUDA, a SIMD-group on Metal
            return ast.Constant(self.values["warpSize"])
        _, _, field = name.rpartition(".")
        if "." in name and field in self.values:
            return self._fixed(field, name)
        if "." in name or "::" in name:
            return None
        fields = set()
        for n in walk(self.root):
            if n.type == "assignment_expression" and text(n.child_by_field_name("left")) == name:
                right = text(n.child_by_field_name("right")).replace(" ", "")
                fields.add(right.rpartition(".")[2] if "." in right else "")
        if len(fields) == 1 and (f := fields.pop()) in self.values:
            return self._fixed(f, name)
        return None

    def call(self, node: Node, lookup) -> tuple[str, ast.expr] | None:
        """(the variable set, its value) for `cudaDeviceGetAttribute(&v, attr, dev)` and
        `cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, threads, smem)` (as many blocks
        of `threads` as the documented threads per multiprocessor hold)."""
        fn = callee(node)
        args = node.child_by_field_name("arguments")
        a = [c for c in args.named_children if c.type != "comment"] if args else []
        if len(a) < 2 or not text(a[0]).startswith("&"):
            return None
        target = text(a[0])[1:].strip()
        if fn == "cudaDeviceGetAttribute" and text(a[1]).strip() in _ATTRIBUTES:
            return target, self._fixed(_ATTRIBUTES[text(a[1]).strip()], target)
        if fn == OCCUPANCY and len(a) >= 3:
            threads = lookup(a[2])
            per_sm = self._fixed("maxThreadsPerMultiProcessor", target)
            return target, ast.Call(
                ast.Name("max"), [ast.Constant(1), ast.BinOp(per_sm, ast.FloorDiv(), threads)], []
            )
        return None

    def _fixed(self, field: str, name: str) -> ast.expr:
        value = self.values[field]
        note = (
            f"the device query `{name}` ({field}) is fixed at {value}, {DEVICE_NAME[self.target]}'s"
            " value, in this port (verification checks that the results do not depend on it)"
        )
        if note not in self.notes:
            self.notes.append(note)
        return ast.Constant(value)
