"""Chart payloads in storage: one object per comparison step, each chart row a byte range of it.

The comparison step (``reviewapp.tasks``) encodes every section payload as JSON text
(:func:`reviewapp.sections.encode`); :func:`write_blob` concatenates them into one object,
``charts/comparison-<id>-<random>.json``, in the default storage (MEDIA_ROOT or the S3 bucket,
like the traces and the EventTable .npz files), and each ``ComparisonChart`` row keeps the
object's name and its ``offset``/``nbytes`` there. One object per step rather than one per chart:
a comparison has a hundred or more (section, device, stage) payloads, and one PUT (and one
DELETE when it is replaced) costs the worker far less than a hundred.

Reading a section is a ranged read of that object (S3: one ranged GET; local: a seek). Payloads
up to ``BLKREVIEW_CHART_CACHE_MAX_BYTES`` are kept in the Django cache (Redis in production) under
the object's name and offset: names are never reused (a new step writes a new object), so a
cached payload is never stale and needs no invalidation; each web process also keeps the
payloads it served last (``BLKREVIEW_CHART_MEMORY_CACHE_MB``, least recently used out first),
so a section asked for again costs no round trip at all. Larger ones are streamed to the client
chunk by chunk (:func:`chunks`), never held whole in the web process.
"""

from __future__ import annotations

import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from reviewapp import storage

PREFIX = "charts"
#: a day: the cache only saves a storage round trip, the payload itself never changes
CACHE_SECONDS = 24 * 3600

Key = tuple[str, str, str]  # (section, dev, stage)


@dataclass(frozen=True)
class ChartRef:
    """Where one chart payload's JSON text is: ``nbytes`` bytes at ``offset`` of ``name``."""

    name: str
    offset: int
    nbytes: int


def new_name(comparison_id: int) -> str:
    return f"{PREFIX}/comparison-{comparison_id}-{uuid.uuid4().hex[:16]}.json"


def write_blob(name: str, charts: Mapping[Key, str]) -> tuple[str, dict[Key, tuple[int, int]]]:
    """Store every payload's UTF-8 text back to back under ``name``.

    Returns:
        ``(stored_name, {key: (offset, nbytes)})``. The bytes go through a spooled temporary
        file (memory up to 16 MiB, then disk) and the storage's own upload (multipart to S3),
        so a large comparison is never a second whole copy in memory.
    """
    index: dict[Key, tuple[int, int]] = {}
    offset = 0
    with tempfile.SpooledTemporaryFile(max_size=16 * 1024 * 1024) as buf:
        for key, text in charts.items():
            data = text.encode()
            buf.write(data)
            index[key] = (offset, len(data))
            offset += len(data)
        buf.seek(0)
        stored = storage.save_bytes(name, buf)
    return stored, index


def _cache_key(ref: ChartRef) -> str:
    return f"chart:{ref.name}:{ref.offset}:{ref.nbytes}"


def cacheable(ref: ChartRef) -> bool:
    return ref.nbytes <= int(settings.BLKREVIEW_CHART_CACHE_MAX_BYTES)


class _Recent:
    """This process's most recently served payloads, up to a byte budget (least recently used
    out first). Payloads never change under a name, so nothing here is ever stale; it saves
    the shared cache's round trip for the sections a page asks for again and again."""

    def __init__(self) -> None:
        self.items: OrderedDict[str, bytes] = OrderedDict()
        self.nbytes = 0
        self.lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self.lock:
            data = self.items.get(key)
            if data is not None:
                self.items.move_to_end(key)
            return data

    def put(self, key: str, data: bytes, budget: int) -> None:
        if len(data) > budget:
            return
        with self.lock:
            if key in self.items:
                return
            self.items[key] = data
            self.nbytes += len(data)
            while self.nbytes > budget and self.items:
                _, old = self.items.popitem(last=False)
                self.nbytes -= len(old)


_recent = _Recent()


def read(ref: ChartRef) -> bytes:
    """The payload's bytes: from this process's recent payloads, else the shared cache, else
    storage (then remembered in both when small enough).

    Raises:
        FileNotFoundError: the object is gone from storage (deleted by hand, a lost bucket).
    """
    if not cacheable(ref):
        return storage.read_range(ref.name, ref.offset, ref.nbytes)
    key = _cache_key(ref)
    budget = int(settings.BLKREVIEW_CHART_MEMORY_CACHE_BYTES)
    data = _recent.get(key)
    if data is not None:
        return data
    data = cache.get(key)
    if data is None:
        data = storage.read_range(ref.name, ref.offset, ref.nbytes)
        cache.set(key, data, CACHE_SECONDS)
    data = bytes(data)
    _recent.put(key, data, budget)
    return data


def chunks(ref: ChartRef) -> Iterator[bytes]:
    """The payload as an iterator of chunks, for a streaming response (large payloads).

    Storage is opened now, so a missing object raises FileNotFoundError here."""
    return storage.iter_range(ref.name, ref.offset, ref.nbytes)
