"""Command line: ``python -m workers inspect|analyze|replay|compare|lab ...`` without the web.

Each subcommand lives in ``workers/cli/<name>.py`` and exposes ``add_arguments(parser)`` and
``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "inspect": "format, devices, event counts per action, time span and parse errors of traces",
    "analyze": "seek histogram, request sizes and an iostat-like table per device",
    "replay": "predict what the disks see under a kernel preset and policy",
    "compare": "baseline vs patched plain-text report, as pasted into a mail reply",
    "fidelity": "replay real captures with their kernel's preset and score the predicted D "
                "streams against the real ones",
    "lab": "capture blktrace bundles on real kernels in qemu (baseline vs patched, matrix)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workers", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in SUBCOMMANDS.items():
        module = importlib.import_module(f"workers.cli.{name}")
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._module.run(args))
    except BrokenPipeError:
        # ``... | head``: the reader went away; stop quietly like the C tools do.
        # Point stdout at /dev/null so the interpreter's final flush does not raise again.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a C tool killed by the pipe


if __name__ == "__main__":
    sys.exit(main())
