"""Command line: ``blkreview inspect|analyze|replay|compare|fidelity|lab|submit ...`` (the
console script of ``[project.scripts]``; ``python -m workers ...`` is the same program).

Each subcommand lives in ``workers/cli/<name>.py`` and exposes ``add_arguments(parser)`` and
``run(args) -> int``; a new one is a module plus a line in :data:`SUBCOMMANDS`. Every
subcommand has ``--json`` (machine-readable stdout) and ``--quiet`` (no progress on stderr;
progress is off anyway when stderr is not a terminal).
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
    "submit": "upload a comparison to a blkreview server over REST, wait for its check, print "
              "the summary; exit 1 on fail (for CI bots)",
}
#: commands that open their own progress (the others run inside one, which their steps reach
#: through workers.cli.progress.current(): a bar of bytes parsed, bios replayed, ...)
OWN_PROGRESS = {"lab", "submit"}


def prog_name() -> str:
    """``blkreview`` when run through the console script, else ``python -m workers``."""
    import os

    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "blkreview" if name == "blkreview" else "python -m workers"



def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog_name(), description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in SUBCOMMANDS.items():
        module = importlib.import_module(f"workers.cli.{name}")
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)
        options = p._option_string_actions
        if "--quiet" not in options:
            p.add_argument("--quiet", "-q", action="store_true",
                           help="no progress on stderr (it is also off when stderr is not a "
                                "terminal)")
        p.set_defaults(_module=module, _name=name)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from workers.cli.progress import Progress, wanted

    try:
        if args._name in OWN_PROGRESS:
            return int(args._module.run(args))
        with Progress(enabled=wanted(bool(getattr(args, "quiet", False))),
                      what=f"{args._name}: working"):
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
