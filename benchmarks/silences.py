"""The silences of a command as a person at a terminal sees them: the gaps between its output lines.

Usage: python benchmarks/silences.py [--over 5] [--ignore REGEX] -- COMMAND [ARGS...]

Runs COMMAND on a pseudo-terminal (so programs print as they would to a person, unbuffered where
they buffer pipes), stamps each line as it arrives, and prints the longest gaps (from the start to
the first line, between lines, and from the last line to the exit) with the line that ended each.
Exits 1 where a gap is longer than --over seconds. Lines matching --ignore end no silence (e.g.
--ignore '^wait ' for mlxport port's lines saying what it still waits on).
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import subprocess
import sys
import time


def stamped_lines(command: list[str]) -> tuple[list[tuple[float, str]], float, int]:
    """Each output line of ``command`` with the seconds since the start it arrived at; the seconds
    it ran and its exit status."""
    master, slave = pty.openpty()
    t0 = time.monotonic()
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    lines, pending, began = [], b"", 0.0
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closes when the command and its children exit
            break
        if not chunk:
            break
        now = time.monotonic() - t0
        began = began if pending else now  # a line shows from its first character
        pending += chunk
        # a line, or a progress bar or spinner redrawn in place (\r, \b), is something to see
        *done, pending = pending.replace(b"\r", b"\n").replace(b"\b", b"\n").split(b"\n")
        lines += [(began, line.decode(errors="replace")) for line in done[:1] if line.strip()]
        lines += [(now, line.decode(errors="replace")) for line in done[1:] if line.strip()]
        began = now
    rc = proc.wait()
    end = time.monotonic() - t0
    if pending.strip():
        lines.append((began, pending.decode(errors="replace")))
    os.close(master)
    return lines, end, rc


def plain(text: str) -> str:
    """The line without its terminal colour codes."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def gaps(lines: list[tuple[float, str]], end: float) -> list[tuple[float, float, str]]:
    """(gap, at, what ended it) for the start, each line and the exit."""
    out, prev = [], 0.0
    for t, text in lines:
        out.append((t - prev, t, text))
        prev = t
    out.append((end - prev, end, "(exit)"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--over", type=float, default=5.0, help="a silence longer than this fails")
    ap.add_argument("--top", type=int, default=5, help="how many of the longest gaps to print")
    ap.add_argument("--ignore", help="a regular expression: lines it finds end no silence")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command to time after --")
    lines, end, rc = stamped_lines(command)
    if args.ignore:
        lines = [(t, text) for t, text in lines if not re.search(args.ignore, plain(text))]
    found = gaps(lines, end)
    for gap, at, text in sorted(found, key=lambda g: -g[0])[: args.top]:
        print(f"{gap:6.1f} s silent, ended at {at:6.1f} s by: {plain(text).strip()[:100]}")
    longest = max(g for g, _, _ in found)
    over = sum(g > args.over for g, _, _ in found)
    print(
        f"{len(lines)} lines in {end:.1f} s (exit {rc}); longest silence {longest:.1f} s; "
        f"{over} over {args.over:g} s"
    )
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
