"""``manage.py import_bundle FILE... [--role patched] [--kernel 6.18.15]``: store a bundle from
local files through the same service as the upload form, and queue its analysis.

Prints the bundle id (and says when the same bytes were already there). Exit status 1 with
the reason when the files are refused (empty, unknown format, over the limit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.files import File
from django.core.management.base import BaseCommand, CommandError

from reviewapp import constants as c
from reviewapp.services import ServiceError
from reviewapp.services.bundles import bundle_create


class Command(BaseCommand):
    help = "Store trace files as one bundle and queue its analysis."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("files", nargs="+")
        parser.add_argument("--role", choices=[r for r, _ in c.ROLES], default=c.ROLE_BASELINE)
        parser.add_argument("--kernel", default="")
        parser.add_argument("--stack", default="")
        parser.add_argument("--limits", default="")
        parser.add_argument("--workload", default="")

    def handle(self, *args: Any, **opts: Any) -> None:
        paths = [Path(p) for p in opts["files"]]
        for p in paths:
            if not p.is_file():
                raise CommandError(f"{p}: no such file")
        handles = [open(p, "rb") for p in paths]  # noqa: SIM115 - closed below
        try:
            files = []
            for p, fh in zip(paths, handles):
                f = File(fh, name=p.name)
                f.size = p.stat().st_size
                files.append(f)
            bundle, _ = bundle_create(
                files=files, role=opts["role"], kernel=opts["kernel"], stack=opts["stack"],
                limits=opts["limits"], workload=opts["workload"], side_label=opts["role"])
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        finally:
            for fh in handles:
                fh.close()
        self.stdout.write(f"bundle {bundle.pk} created")
