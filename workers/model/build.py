"""Direct-I/O bio building: how one application I/O becomes bios (kernel-model.md section 6).

``__bio_iov_iter_get_pages`` (block/bio.c) pins the user pages of one read()/write() and adds
them to a bio until the iterator is empty or the bio's 256 bvec slots (BIO_MAX_VECS) are used.
Since v5.1 (07173c3ec276, multipage bvecs) a page that is physically contiguous with the
previous one extends that bvec instead of taking a slot, so a bio holds
``256 * run`` pages when the buffer is made of physically contiguous runs of ``run`` pages:
1 MiB for a fully fragmented buffer, 1 MiB + 4 KiB for one page join (E6.2), the whole request
for a contiguous buffer (the 6.1 capture: a 2M dd read is one 4096-sector bio).

Policy ``dio_bio_limit=pages`` caps a bio at 256 pages (1 MiB) whatever the contiguity (before
5.1, and what the 7.2 capture shows: 1028k reads arrive as 2048 + 8). Policy ``bio_build``:

* ``uncapped``: sizes as above.
* ``cap_max_sectors``: Ed Tsai's patch: stop the bio at ``max - (bi_size mod max)``, i.e. a
  bio that reached at least max_sectors is trimmed to a multiple of it.
* ``align:N``: Ming Lei's counter-proposal: bios of at least N bytes are trimmed to a multiple
  of N.

The trimmed-off pages start the next bio, so the request's bytes are conserved. The result is
vectorized over all application I/Os (numpy), one row per bio.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from workers.model.policy import Policy

PAGE = 4096
BIO_MAX_VECS = 256


@dataclass(frozen=True)
class BuiltBios:
    """Bios of many application I/Os; ``io`` is the source I/O of each bio."""

    io: npt.NDArray[np.int64]
    sector: npt.NDArray[np.int64]
    nr_sectors: npt.NDArray[np.int64]
    seg_bytes: npt.NDArray[np.int64]


def natural_bio_pages(joins: int | None = None, run_pages: int | None = None) -> int:
    """Pages a full bio holds: 256 slots plus one page per join (0 = unbounded, contiguous).

    ``joins``: physically contiguous page joins per bio (E6.2: one join = 1028 KiB).
    ``run_pages``: the buffer is made of contiguous runs of this many pages (256 * run).
    """
    if joins is not None:
        return BIO_MAX_VECS + max(joins, 0)
    if run_pages is not None and run_pages > 0:
        return BIO_MAX_VECS * run_pages
    return 0


def trimmed(size: npt.NDArray[np.int64], policy: Policy, max_bytes: int
            ) -> npt.NDArray[np.int64]:
    """Apply ``bio_build`` to full-bio sizes (bytes)."""
    if policy.bio_build == "cap_max_sectors" and max_bytes > 0:
        return np.where(size >= max_bytes, size - size % max_bytes, size)
    align = policy.bio_align_bytes
    if align > 0:
        return np.where(size >= align, size - size % align, size)
    return size


def build_bios(sector: npt.ArrayLike, nr_sectors: npt.ArrayLike, bio_pages: npt.ArrayLike,
               policy: Policy, *, max_sectors: int, seg_bytes: npt.ArrayLike = PAGE,
               lbs: int = 512) -> BuiltBios:
    """Split application I/Os into bios (one row per bio, in submission order).

    Args:
        sector / nr_sectors: the application I/Os (device offset and length in sectors).
        bio_pages: pages one full bio holds for each I/O's buffer (:func:`natural_bio_pages`;
            0 = the buffer is contiguous, a bio is as large as the I/O).
        policy: ``bio_build`` and ``dio_bio_limit``.
        max_sectors: the top device's max_sectors (for ``cap_max_sectors``).
        seg_bytes: contiguous-run length of the buffer for the split code's segment model
            (0 = contiguous).
        lbs: logical block size: bio sizes are trimmed to it (bio_iov_iter_align_down).
    """
    s = np.asarray(sector, dtype=np.int64).ravel()
    n = np.asarray(nr_sectors, dtype=np.int64).ravel()
    bp = np.broadcast_to(np.asarray(bio_pages, dtype=np.int64), s.shape)
    sb = np.broadcast_to(np.asarray(seg_bytes, dtype=np.int64), s.shape)
    max_bytes = max_sectors << 9
    if policy.dio_bio_limit == "pages":
        full = np.full(s.shape, BIO_MAX_VECS * PAGE, dtype=np.int64)
    else:
        full = np.where(bp <= 0, np.int64(1 << 62), np.maximum(bp, 1) * PAGE)
    cut = trimmed(full, policy, max_bytes)
    cut = np.maximum(cut - cut % lbs, lbs)
    total = n << 9
    nbios = np.where(total > 0, -(-total // cut), 0)
    io = np.repeat(np.arange(len(s), dtype=np.int64), nbios)
    first = np.cumsum(nbios) - nbios
    k = np.arange(len(io), dtype=np.int64) - np.repeat(first, nbios)
    start_b = k * np.repeat(cut, nbios)
    size_b = np.minimum(np.repeat(cut, nbios), np.repeat(total, nbios) - start_b)
    return BuiltBios(io=io, sector=np.repeat(s, nbios) + (start_b >> 9), nr_sectors=size_b >> 9,
                     seg_bytes=np.repeat(sb, nbios))
