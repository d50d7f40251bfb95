"""Every policy field described: its values, what it does and which kernel changed it.

One source for ``python -m workers replay --list-policies`` and the table in docs/model.md
(a test keeps the two equal). The descriptions are the ``Attributes:`` of
:class:`workers.model.policy.Policy`'s docstring, the values its ``CHOICES``, the kernels the
change points of :data:`workers.model.presets.CHANGES`.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from workers.model.policy import CHOICES, POLICY_FIELDS, Policy
from workers.model.presets import CHANGES


@dataclass(frozen=True)
class FieldDoc:
    """One policy field: ``values`` as typed on ``--policy``, ``what`` it models, ``kernels``
    as ``(version, value, source)`` in version order (the first is the oldest preset's)."""

    name: str
    values: str
    what: str
    kernels: tuple[tuple[str, str, str], ...]


def _attributes() -> dict[str, str]:
    """``{field: description}`` from the Attributes section of Policy's docstring."""
    doc = textwrap.dedent((Policy.__doc__ or "").split("Attributes:", 1)[-1])
    out: dict[str, str] = {}
    name = ""
    for line in doc.splitlines():
        m = re.match(r"^(\w+): (.*)$", line)
        if m:
            name = m.group(1)
            out[name] = m.group(2).strip()
        elif name and line.startswith("    "):
            out[name] += " " + line.strip()
    return {k: v.replace("``", "") for k, v in out.items()}


def field_docs() -> list[FieldDoc]:
    """Every behaviour field of :class:`Policy`, in declaration order."""
    what = _attributes()
    out = []
    for f in POLICY_FIELDS:
        values = (" | ".join(str(c) for c in CHOICES[f]) if f in CHOICES
                  else "uncapped | cap_max_sectors | align:<bytes>")
        kernels = []
        last = None
        for version, changes, source in CHANGES:
            if f in changes and changes[f] != last:
                kernels.append((".".join(str(v) for v in version), str(changes[f]), source))
                last = changes[f]
        out.append(FieldDoc(f, values, what.get(f, ""), tuple(kernels)))
    return out


def text_listing(width: int = 100) -> str:
    """The ``--list-policies`` text: one block per field."""
    lines = []
    for d in field_docs():
        lines.append(f"{d.name} = {d.values}")
        lines += textwrap.wrap(d.what, width, initial_indent="    ", subsequent_indent="    ")
        if d.kernels:
            first = d.kernels[0]
            lines.append(f"    kernels: {first[1]} in the oldest preset ({first[0]})")
            for version, value, source in d.kernels[1:]:
                lines += textwrap.wrap(f"{value} from {version}: {source}", width,
                                       initial_indent="      ", subsequent_indent="        ")
        else:
            lines.append("    kernels: no preset changes it (a knob for patches under test)")
        lines.append("")
    return "\n".join(lines)


def markdown_table() -> str:
    """The docs/model.md table: field, values, what it does, which kernel changed it."""
    rows = ["| field | values | what it does | kernels (preset change points) |",
            "|---|---|---|---|"]
    for d in field_docs():
        ks = "; ".join([f"{d.kernels[0][1]} (oldest preset, {d.kernels[0][0]})"]
                       + [f"{v} from {ver} ({src})" for ver, v, src in d.kernels[1:]]
                       ) if d.kernels else "no preset changes it"
        cells = [f"`{d.name}`", d.values.replace("|", "\\|"), d.what.replace("|", "\\|"),
                 ks.replace("|", "\\|")]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
