"""``blkreview submit BASELINE... -- PATCHED...``: upload a comparison through the REST API (for
CI bots), wait for its check, print the summary, exit non-zero when the check fails.

The server is ``--url`` or ``$BLKREVIEW_URL``; the API token is read from the environment
variable named by ``--token-env`` (default ``BLKREVIEW_TOKEN``), never from the command line,
so it stays out of shell history and process lists. Files are streamed (a multipart body whose
length is known up front), never read whole into memory. Directories are expanded like the
other commands do (``inspect DIR`` shows what is sent); archives are sent as they are.

Exit codes: 0 the check is ``success`` or ``warning`` (``--fail-on-warning``: only success),
1 ``fail``, 3 ``error`` (a job failed: the reason is printed), 4 timed out waiting,
2 usage, connection or HTTP error. Plain standard library (urllib): no web code is imported.
"""

from __future__ import annotations

import argparse
import json
import mimetypes
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from workers.cli.common import UsageError, guarded

EXIT = {"success": 0, "warning": 0, "fail": 1, "error": 3}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("BLKREVIEW_URL", ""),
                        help="the server, e.g. https://review.example.org (default "
                             "$BLKREVIEW_URL)")
    parser.add_argument("--token-env", default="BLKREVIEW_TOKEN", metavar="NAME",
                        help="environment variable holding the API token (default "
                             "BLKREVIEW_TOKEN)")
    parser.add_argument("--title", default="", help="patch title")
    parser.add_argument("--version", default="", help="series version, e.g. v2")
    parser.add_argument("--baseline-kernel", default="")
    parser.add_argument("--patched-kernel", default="")
    parser.add_argument("--policy", default="", help="policy under test for the model panel")
    parser.add_argument("--thresholds", default="",
                        help="check threshold overrides: name=value,... or a JSON object")
    parser.add_argument("--no-wait", action="store_true",
                        help="print the comparison's URLs and return without waiting")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="seconds to wait for the check (default 3600)")
    parser.add_argument("--poll", type=float, default=5.0, help="seconds between polls")
    parser.add_argument("--fail-on-warning", action="store_true",
                        help="exit 1 on a warning too")
    parser.add_argument("--json", action="store_true",
                        help="print the submission and the check as JSON")
    parser.add_argument("files", nargs=argparse.REMAINDER, metavar="BASELINE... -- PATCHED...",
                        help="after the options: baseline files, --, patched files (files, "
                             "capture directories or archives)")


def split_sides(files: list[str]) -> tuple[list[str], list[str]]:
    if files.count("--") != 1:
        raise UsageError("give the baseline files, then --, then the patched files")
    i = files.index("--")
    baseline, patched = files[:i], files[i + 1:]
    if not baseline or not patched:
        raise UsageError("both sides need at least one file")
    return baseline, patched


def expand(paths: list[str]) -> list[Path]:
    """Files to upload: files and archives as given, a directory as its trace files."""
    from workers.cli.common import directory_files

    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(Path(f) for f in directory_files(path))
        elif path.is_file():
            out.append(path)
        else:
            raise UsageError(f"{p}: no such file or directory")
    return out


class MultipartBody:
    """A multipart/form-data body read in blocks: fields, then each file streamed from disk."""

    def __init__(self, fields: dict[str, str], files: list[tuple[str, Path]]) -> None:
        self.boundary = f"blkreview-{uuid.uuid4().hex}"
        self._parts: list[bytes | Path] = []
        for name, value in fields.items():
            self._parts.append(self._head(name) + b"\r\n" + value.encode() + b"\r\n")
        for name, path in files:
            ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            self._parts.append(self._head(name, path.name) +
                               f"Content-Type: {ctype}\r\n\r\n".encode())
            self._parts.append(path)
            self._parts.append(b"\r\n")
        self._parts.append(f"--{self.boundary}--\r\n".encode())
        self.length = sum(p.stat().st_size if isinstance(p, Path) else len(p)
                          for p in self._parts)
        self._it = self._blocks()
        self._buf = b""

    def _head(self, name: str, filename: str | None = None) -> bytes:
        disp = f'form-data; name="{name}"'
        if filename is not None:
            safe = filename.replace('"', "_").replace("\r", "_").replace("\n", "_")
            disp += f'; filename="{safe}"'
        return f"--{self.boundary}\r\nContent-Disposition: {disp}\r\n".encode()

    def _blocks(self) -> Iterator[bytes]:
        for part in self._parts:
            if isinstance(part, Path):
                with open(part, "rb") as fh:
                    while block := fh.read(1 << 20):
                        yield block
            else:
                yield part

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buf) < size:
            try:
                self._buf += next(self._it)
            except StopIteration:
                break
        if size < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:size], self._buf[size:]
        return out


def _request(method: str, url: str, token: str, *, body: BinaryIO | MultipartBody | None = None,
             headers: dict[str, str] | None = None, timeout: float = 60.0) -> Any:
    req = urllib.request.Request(url, method=method, data=body,  # type: ignore[arg-type]
                                 headers={"Authorization": f"Token {token}",
                                          "Accept": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode() or "null")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:2000]
        raise UsageError(f"{method} {url}: HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise UsageError(f"{method} {url}: {getattr(exc, 'reason', exc)}") from None


def run(args: argparse.Namespace) -> int:
    return guarded(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from workers.cli.progress import Progress

    if not args.url:
        raise UsageError("no server: give --url or set BLKREVIEW_URL")
    token = os.environ.get(args.token_env, "")
    if not token:
        raise UsageError(f"no API token: set the environment variable {args.token_env}")
    baseline, patched = split_sides(args.files)
    files = ([("baseline_files", p) for p in expand(baseline)] +
             [("patched_files", p) for p in expand(patched)])
    fields = {k: v for k, v in (("title", args.title), ("version", args.version),
                                ("baseline_kernel", args.baseline_kernel),
                                ("patched_kernel", args.patched_kernel),
                                ("policy", args.policy),
                                ("thresholds", args.thresholds)) if v}
    body = MultipartBody(fields, files)
    base = args.url.rstrip("/")
    with Progress(enabled=not args.quiet, what="uploading") as bar:
        bar.update(f"uploading {len(files)} files ({body.length / 1e6:.1f} MB)")
        sub = _request("POST", f"{base}/api/v1/submissions/", token, body=body, headers={
            "Content-Type": f"multipart/form-data; boundary={body.boundary}",
            "Content-Length": str(body.length)}, timeout=max(60.0, args.timeout))
        if args.no_wait:
            _print(args, sub, None)
            return 0
        deadline = time.monotonic() + args.timeout
        while True:
            check = _request("GET", sub["check_url"], token)
            if check.get("state") != "pending":
                break
            step = check.get("step") or {}
            bar.update(f"waiting for the check: {check.get('status', '')} "
                       f"{step.get('message', '') if isinstance(step, dict) else ''}".strip())
            if time.monotonic() > deadline:
                _print(args, sub, check)
                sys.stderr.write(f"error: no check after {args.timeout:.0f} s\n")
                return 4
            time.sleep(args.poll)
    _print(args, sub, check)
    state = str(check.get("state"))
    if state == "warning" and args.fail_on_warning:
        return 1
    return EXIT.get(state, 3)


def _print(args: argparse.Namespace, sub: dict[str, Any], check: dict[str, Any] | None) -> None:
    if args.json:
        json.dump({"submission": sub, "check": check}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    out = [f"comparison {sub.get('id')}: {sub.get('url')}"]
    if check is None:
        out.append(f"check: {sub.get('check_url')}")
    else:
        out.append(f"check: {check.get('state')}")
        if check.get("summary"):
            out.append(str(check["summary"]))
        out.extend(f"  - {r}" for r in check.get("reasons") or [])
        if check.get("report_url"):
            out.append(f"report: {check['report_url']}")
    sys.stdout.write("\n".join(out) + "\n")
