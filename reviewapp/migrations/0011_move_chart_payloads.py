"""Data migration: every stored chart payload goes to storage, one object per comparison.

Forward: the payloads of each comparison are written back to back into
``charts/comparison-<id>-<random>.json`` in the default storage (MEDIA_ROOT or the S3 bucket;
the layout of reviewapp/chartstore.py) and each row gets that name and its byte range; the
database column is emptied in the same transaction as the row update, one comparison at a
time, so an interrupted run resumes where it stopped (rows that already have a storage name are
skipped). Backward: the bytes are read back into the column and the objects deleted.
The logic is written out here, not imported, so the migration stays what it was when the
app's code moves on.
"""

import contextlib
import tempfile
import uuid

from django.core.files import File
from django.core.files.storage import default_storage
from django.db import migrations, transaction


def forward(apps, schema_editor):
    Chart = apps.get_model("reviewapp", "ComparisonChart")
    ids = (Chart.objects.filter(storage_name="").values_list("comparison_id", flat=True)
           .distinct().order_by("comparison_id"))
    for comparison_id in list(ids):
        rows = list(Chart.objects.filter(comparison_id=comparison_id, storage_name="")
                    .order_by("pk"))
        name = f"charts/comparison-{comparison_id}-{uuid.uuid4().hex[:16]}.json"
        ranges = []
        with tempfile.SpooledTemporaryFile(max_size=16 * 1024 * 1024) as buf:
            offset = 0
            for row in rows:
                data = (row.payload or "").encode()
                buf.write(data)
                ranges.append((row, offset, len(data)))
                offset += len(data)
            buf.seek(0)
            stored = default_storage.save(name, File(buf))
        try:
            with transaction.atomic():
                for row, offset, nbytes in ranges:
                    row.storage_name, row.offset, row.nbytes, row.payload = stored, offset, nbytes, ""
                    row.save(update_fields=["storage_name", "offset", "nbytes", "payload"])
        except BaseException:
            with contextlib.suppress(Exception):
                default_storage.delete(stored)
            raise


def backward(apps, schema_editor):
    Chart = apps.get_model("reviewapp", "ComparisonChart")
    names = list(Chart.objects.exclude(storage_name="").values_list("storage_name", flat=True)
                 .distinct())
    for name in names:
        with default_storage.open(name, "rb") as src:
            blob = src.read()
        with transaction.atomic():
            for row in Chart.objects.filter(storage_name=name):
                row.payload = blob[row.offset:row.offset + row.nbytes].decode()
                row.storage_name, row.offset = "", 0
                row.save(update_fields=["payload", "storage_name", "offset"])
        with contextlib.suppress(Exception):
            default_storage.delete(name)


class Migration(migrations.Migration):
    # one transaction per comparison (above), not one for the whole table
    atomic = False

    dependencies = [
        ('reviewapp', '0010_chart_payloads_in_storage'),
    ]

    operations = [
        migrations.RunPython(forward, backward),
    ]
