"""Post baseline and patched bundles as one comparison: ``POST /api/v1/submissions/``.

Plain ``urllib`` multipart (the engine needs no HTTP client package). The answer carries the
comparison id, the job id and the page URL (docs/api.md).
"""

from __future__ import annotations

import json
import mimetypes
import secrets
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from workers.lab.host import LabError


def multipart(fields: list[tuple[str, str]], files: list[tuple[str, Path]]) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body and its content type."""
    boundary = "blkreview-lab-" + secrets.token_hex(12)
    parts: list[bytes] = []
    for name, value in fields:
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                     .encode() + value.encode() + b"\r\n")
    for name, path in files:
        ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        head = (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                f'filename="{path.name}"\r\nContent-Type: {ctype}\r\n\r\n').encode()
        parts.append(head + path.read_bytes() + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def submissions_url(url: str) -> str:
    """``http://host:8000`` or ``.../api/v1/submissions/`` -> the submissions endpoint."""
    url = url.rstrip("/")
    if url.endswith("/api/v1/submissions"):
        return url + "/"
    return url + "/api/v1/submissions/"


def upload_comparison(url: str, token: str, *, title: str, baseline: list[Path],
                      patched: list[Path], baseline_kernel: str, patched_kernel: str,
                      workload: str = "", stack: str = "", timeout: float = 600.0
                      ) -> dict[str, Any]:
    """Create one comparison from the two sides' bundles.

    Raises:
        LabError: the server refused (status and its error message) or cannot be reached.
    """
    fields = [("title", title), ("baseline_kernel", baseline_kernel),
              ("patched_kernel", patched_kernel)]
    if workload:
        fields.append(("workload", workload))
    if stack:
        fields.append(("stack", stack))
    files = [("baseline_files", p) for p in baseline] + [("patched_files", p) for p in patched]
    body, ctype = multipart(fields, files)
    req = urllib.request.Request(submissions_url(url), data=body, method="POST", headers={
        "Content-Type": ctype, "Authorization": f"Token {token}", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return dict(json.loads(resp.read().decode()))
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:2000]
        raise LabError(f"upload refused: HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise LabError(f"upload to {url} failed: {exc}") from None
