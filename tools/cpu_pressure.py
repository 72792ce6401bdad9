"""`python -m tools.cpu_pressure [--rounds N] [--share-core] -- COMMAND...`: a command, rounds in a row, busy CPU.

dr-stream is run on machines that are busy or slower than the one its tests were tuned on, and
a verdict that depends on the machine's speed is a bug. This runs COMMAND (a test selection,
`make demo`) `--rounds` times in a row while one process holds a core busy (pinned to the
machine's first core, at the same priority as everything else), and stops at the first round
that fails. `--share-core` pins COMMAND to that same core as well: it then gets about half of
one core, slower still than a machine with one core taken.

Prints a line per round (exit code, seconds) and a summary; exits 0 only when every round
passed. The busy process is stopped by its PID however the run ends.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

BUSY_LOOP = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.cpu_pressure", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="times in a row (default 3)")
    parser.add_argument("--share-core", action="store_true", help="pin COMMAND to the busy core too")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("give the command to run after --")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    core = min(os.sched_getaffinity(0))
    busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(core)])
    pin = (lambda: os.sched_setaffinity(0, {core})) if args.share_core else None
    times: list[float] = []
    try:
        for round_ in range(1, args.rounds + 1):
            print(f"cpu pressure: round {round_} of {args.rounds}: core {core} held busy (pid {busy.pid})"
                  f"{', the command pinned to it' if pin else ''}: {' '.join(args.command)}", flush=True)
            began = time.monotonic()
            code = subprocess.run(args.command, preexec_fn=pin).returncode
            times.append(time.monotonic() - began)
            print(f"cpu pressure: round {round_} of {args.rounds}: exit {code} after {times[-1]:.0f} s", flush=True)
            if code != 0:
                print(f"cpu pressure: failed in round {round_} ({len(times) - 1} green before it)", file=sys.stderr)
                return 1
    finally:
        busy.kill()
        busy.wait()
    print(f"cpu pressure: {args.rounds} of {args.rounds} green in a row; seconds per round: "
          f"{', '.join(f'{t:.0f}' for t in times)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
