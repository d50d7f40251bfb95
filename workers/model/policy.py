"""The replay model's policy: one switch per kernel behaviour a seed patch changes.

Field names and values are fixed by kernel-model.md section 7 and are spelled the same in code,
manifests, the CLI (``--policy split_remainder=head,plug_order=fifo``) and the API. A kernel
preset (:mod:`workers.model.presets`) sets every field as that kernel behaves.

Two fields are additions of this model, documented in docs/model.md: ``dio_bio_limit`` (does a
direct-I/O bio end after 256 bvecs, as multipage bvecs allow since v5.1, or after 256 pages, as
before 5.1 and as the 7.2 capture shows) and ``name`` (the preset label, informational).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workers.errors import ModelConfigError

#: Allowed values of every enumerated field (``bio_build`` also takes ``align:<bytes>``).
CHOICES: dict[str, tuple[Any, ...]] = {
    "split_remainder": ("tail", "head"),
    "split_nomerge": ("set", "cleared_by_md"),
    "raid0_discard": ("per_chunk", "per_member"),
    "raid10_discard": ("per_chunk", "per_member"),
    "plug_order": ("fifo_sorted", "lifo", "fifo"),
    "plug_merge_candidate": ("scan", "newest", "oldest"),
    "plug_flush_check": ("newest", "oldest"),
    "max_plug_count": (16, 32),
    "sbitmap_wakeup": ("per_queue", "global"),
    "tag_preempt": ("always", "waiters_first"),
    "flags_on_resubmit": ("reset", "preserve"),
    "max_sectors_cap_kb": (1280, 4096),
    "md_io_opt_align": ("off", "on"),
    "dio_bio_limit": ("vecs", "pages"),
    "unplug_trace": ("always", "not_direct"),
    "md_read_balance": ("scan", "first_idle"),
    "raid10_chunk_limit": ("off", "on"),
    "raid0_split": ("resubmit", "map_both"),
    "sched_wakeup": ("cfs", "eevdf"),
    "dm_crypt_split": ("writes_1m", "128k"),
    "md_flush": ("work", "inline"),
    "raid1_barrier": ("window", "units"),
    "write_zeroes_chunk": ("off", "on"),
    "dm_stripe_chunk_limit": ("off", "on"),
}

#: Old spellings still accepted (stored comparisons and scripts may carry them): field -> old -> new.
VALUE_ALIASES: dict[str, dict[str, str]] = {
    "tag_preempt": {"seed003": "waiters_first"},
}


@dataclass(frozen=True)
class Policy:
    """Every behavioural switch of the model (kernel-model.md section 7).

    Attributes:
        split_remainder: where ``bio_submit_split`` puts the remainder on
            ``current->bio_list[0]``: ``tail`` (bio_list_add) or ``head`` (v6.18
            b2f5974079d8, ``bio_list_add_head``).
        split_nomerge: ``set``: split fronts keep REQ_NOMERGE down the stack; ``cleared_by_md``:
            ``md_submit_bio`` clears it ("bio could be mergeable after passing to underlayer").
        raid0_discard: ``per_chunk`` (discards split per chunk like other bios, before
            ``raid0_handle_discard``) or ``per_member`` (one bio per member).
        raid10_discard: ``per_chunk`` (a discard goes through ``raid10_make_request`` like a
            write: split at every chunk, each piece cloned to every copy) or ``per_member``
            (Xiao Ni's "md/raid10: improve raid10 discard request", about v5.13:
            ``raid10_handle_discard`` sends a discard of two stripes or more as one bio per
            member, ``md_submit_discard_bio``, member 0 first).
        bio_build: direct-I/O bio filling: ``uncapped``, ``cap_max_sectors`` (Ed Tsai's patch:
            stop the bio at a multiple of max_sectors) or ``align:<bytes>`` (Ming Lei's).
        plug_order: ``fifo_sorted`` (<= 5.15, list sorted at flush), ``lifo`` (5.16-6.12.24,
            rq_list_add at the head and direct issue pops the head) or ``fifo`` (6.13+).
        plug_merge_candidate: which plugged request ``blk_attempt_plug_merge`` tries.
        plug_flush_check: which request the 128K check of ``blk_add_rq_to_plug`` measures.
        max_plug_count: BLK_MAX_REQUEST_COUNT.
        sbitmap_wakeup: ``per_queue`` wait_cnt (<= 6.1) or ``global`` completion counter.
        tag_preempt: ``always`` (a newcomer takes a freed tag even while threads sleep) or
            ``waiters_first`` (the seed 003 series: no preemption while more than 8 threads
            wait, except split continuations and threads that slept; wake-ups sized by the
            tags waiters need). The old spelling ``seed003`` is accepted as an alias.
        flags_on_resubmit: a stacked driver (bcache) ``reset``s or ``preserve``s op flags.
        max_sectors_cap_kb: BLK_DEF_MAX_SECTORS_CAP in KiB.
        md_io_opt_align: md sets chunk_sectors to the stripe width (seen on 7.2).
        dio_bio_limit: ``vecs`` (256 multipage bvecs) or ``pages`` (256 pages = 1 MiB).
        unplug_trace: which plug flushes ``trace_block_unplug`` (U, with the depth) records:
            ``always`` (<= 5.15, where every flush goes through the per-queue batches, and from
            6.12, Keith Busch's "blk-mq: add missing unplug trace event" for the single-queue
            direct path of ``blk_mq_flush_plug_list``) or ``not_direct`` (5.16-6.11: only
            ``blk_mq_dispatch_plug_list``, i.e. with an elevator, several queues or from
            schedule).
        md_read_balance: how raid1's ``read_balance`` picks a member when no member continues a
            sequential read: ``scan`` (every kernel: a sequential member anywhere wins, then
            the least busy, else the nearest head; Yu Kuai's 6.9 ``choose_best_rdev`` kept it,
            the loop returns early only for a sequential member) or ``first_idle`` (no
            kernel's rule, a what-if: the scan stops at the first idle member).
        raid10_chunk_limit: ``on``: raid10 sets the queue's ``chunk_sectors`` to its chunk
            (John Garry's "md/raid10: set chunk_sectors limit", inferred 6.17), so
            ``bio_split_to_limits`` already splits at chunk boundaries; ``off``: md splits at
            max_sectors and ``raid10_make_request`` then at the chunk, which leaves short
            pieces when max_sectors is not a multiple of the chunk.
        raid0_split: what ``raid0_make_request`` does with the remainder when a bio crosses a
            chunk boundary: ``resubmit`` (f00d7c85be9e "md/raid0: fix up bio splitting", v4.14:
            the remainder goes back to ``submit_bio_noacct`` and is mapped after the front's
            member bio was issued) or ``map_both`` (319ff40a5427 "md/raid0: Fix performance
            regression for large sequential writes", v6.6 and stable 5.15.132 / 6.1.53:
            ``raid0_map_submit_bio`` maps the remainder first, then the front, both onto the
            bio list before the next bio of the md device). Only where such a bio reaches
            raid0, i.e. md's ``chunk_sectors`` is 0 and ``max_sectors`` one chunk (up to 6.16;
            from 6.17 raid0 sets ``chunk_sectors`` and ``bio_split_to_limits`` already cuts at
            chunks, so 6.18's switch to ``bio_submit_split_bioset`` is no change point here).
        sched_wakeup: how the CPU scheduler treats a woken kernel worker, as far as the
            replay sees it: md's superblock writes (``md_update_sb``), whose flush sequences
            kblockd's high-priority worker runs, each step in the order it was kicked
            (``blk_mq_kick_requeue_list``). ``cfs`` (up to 6.5, ``check_preempt_wakeup``):
            the worker preempts md's thread at each kick, and md's thread inserts the next
            member's write only once the worker is idle (at the trace's insertions; with no
            trace times, one member's whole sequence before the next); ``eevdf``
            (147f3efaa241, v6.6, RUN_TO_PARITY in ``pick_eevdf``): md's thread inserts every
            member's write before the worker runs, so all pre-flushes go first and the
            sequences run side by side.
        dm_crypt_split: where dm-crypt (``crypt_map`` -> ``dm_accept_partial_bio`` with
            ``get_max_request_sectors``) cuts a bio, the rest resubmitted by dm:
            ``writes_1m`` (up to 6.10: writes above BIO_MAX_VECS pages; reads whole) or
            ``128k`` (0d815e3400e6 "dm-crypt: limit the size of encryption requests", v6.11:
            reads and writes at 128 KiB, the ``max_read_size`` / ``max_write_size`` defaults).
        md_flush: how ``md_flush_request`` handles a REQ_PREFLUSH bio with data: ``work`` (up to
            6.11: ``submit_flushes`` on md_wq sends an empty flush to every member and
            ``md_submit_flush_data`` maps the bio once they have all completed, so each member
            flushes before the data) or ``inline`` (Yu Kuai's "md: remove flush handling",
            md-6.12: the empty flushes are chained to the bio and submitted by the submitter,
            which maps the bio at once; a member's flush request goes out from kblockd
            (``blk_kick_flush`` -> ``blk_mq_kick_requeue_list``), after the data request the
            submitter issued itself).
        raid1_barrier: how raid1 cuts a bio for its I/O barrier: ``window`` (before v4.11:
            one resync window, ``wait_barrier`` / ``start_next_window``, no cut) or ``units``
            (fd76863e37fe "RAID1: a new I/O barrier implementation to remove resync window",
            Coly Li, v4.11: pending I/O is counted per 64 MiB barrier unit, and
            ``raid1_make_request`` cuts every bio at its unit's end,
            ``align_to_barrier_unit_end``; reads, writes and discards alike, the rest
            resubmitted).
        write_zeroes_chunk: whether ``bio_split_to_limits`` cuts a REQ_OP_WRITE_ZEROES bio at
            the queue's chunk_sectors boundaries: ``off`` (885fa13f6559 up to 6.12.1: a plain
            ``bio_split`` at max_write_zeroes_sectors) or ``on`` (60dc5ea6bcfd "block: take
            chunk_sectors into account in bio_split_write_zeroes", Christoph Hellwig, v6.13
            and stable 6.12.2: ``get_max_io_size`` with max_write_zeroes_sectors).
        dm_stripe_chunk_limit: whether dm-stripe sets its queue's ``chunk_sectors`` to the
            chunk (``stripe_io_hints``): ``off`` (io_min and io_opt only; the stacked
            chunk_sectors of the members, 0 on plain disks) or ``on`` (5fb9d4341b78
            "dm-stripe: limit chunk_sectors to the stripe size", John Garry, v6.17 and stable
            6.12.43). dm's ``bio_split_to_limits`` of a write-zeroes bio (abnormal I/O) then
            cuts it at every chunk under ``write_zeroes_chunk=on``, and each piece reaches one
            member (6.18.15: X at every chunk on the top); without, one write-zeroes per
            stripe covers the whole range (``stripe_map_range``; 6.1.0-57's mkfs.ext4 journal,
            64 MiB, one write per member).
        name: the preset label this policy came from (not a behaviour).
    """

    split_remainder: str = "head"
    split_nomerge: str = "cleared_by_md"
    raid0_discard: str = "per_member"
    raid10_discard: str = "per_member"
    bio_build: str = "uncapped"
    plug_order: str = "fifo"
    plug_merge_candidate: str = "newest"
    plug_flush_check: str = "oldest"
    max_plug_count: int = 32
    sbitmap_wakeup: str = "global"
    tag_preempt: str = "always"
    flags_on_resubmit: str = "preserve"
    max_sectors_cap_kb: int = 4096
    md_io_opt_align: str = "off"
    dio_bio_limit: str = "vecs"
    unplug_trace: str = "always"
    md_read_balance: str = "scan"
    raid10_chunk_limit: str = "on"
    raid0_split: str = "map_both"
    sched_wakeup: str = "eevdf"
    dm_crypt_split: str = "128k"
    md_flush: str = "inline"
    raid1_barrier: str = "units"
    write_zeroes_chunk: str = "on"
    dm_stripe_chunk_limit: str = "on"
    name: str = "custom"

    def __post_init__(self) -> None:
        if self.tag_preempt in VALUE_ALIASES.get("tag_preempt", {}):
            object.__setattr__(self, "tag_preempt", VALUE_ALIASES["tag_preempt"][self.tag_preempt])
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "name":
                if not isinstance(value, str):
                    raise ModelConfigError("policy name must be a string")
            elif f.name == "bio_build":
                _check_bio_build(value)
            elif value not in CHOICES[f.name] or isinstance(value, bool):
                allowed = " | ".join(str(c) for c in CHOICES[f.name])
                raise ModelConfigError(f"policy {f.name}={value!r}: expected {allowed}")

    # --- derived -------------------------------------------------------------------------
    @property
    def bio_align_bytes(self) -> int:
        """The N of ``bio_build=align:N`` (0 otherwise)."""
        if self.bio_build.startswith("align:"):
            return _parse_size(self.bio_build[6:])
        return 0

    # --- construction ---------------------------------------------------------------------
    def with_overrides(self, spec: str | Mapping[str, Any] | None) -> Policy:
        """A copy with fields changed by ``"k=v,k=v"`` (or a mapping).

        Raises:
            ModelConfigError: unknown fields, malformed items or values outside the choices,
                every one of them in one message.
        """
        if not spec:
            return self
        items: dict[str, Any] = {}
        errors: list[str] = []  # every bad item is reported, not only the first
        if isinstance(spec, Mapping):
            items = {str(k).strip(): v for k, v in spec.items()}
        else:
            for part in str(spec).split(","):
                part = part.strip()
                if not part:
                    continue
                if "=" not in part:
                    errors.append(f"policy override {part!r} is not key=value")
                    continue
                key, _, value = part.partition("=")
                items[key.strip()] = value.strip()
        changes: dict[str, Any] = {}
        for key, value in items.items():
            if key not in _FIELDS or key == "name":
                errors.append(f"unknown policy field {key!r}")
                continue
            try:
                changes[key] = _coerce(key, value)
                dataclasses.replace(self, **{key: changes[key]})  # this value alone
            except ModelConfigError as exc:
                errors.append(str(exc))
                changes.pop(key, None)
        if errors:
            if any(e.startswith("unknown policy field") for e in errors):
                errors.append(f"known: {', '.join(sorted(CHOICES) + ['bio_build'])}")
            raise ModelConfigError("; ".join(errors))
        name = self.name if self.name.endswith("+overrides") else f"{self.name}+overrides"
        return dataclasses.replace(self, **changes, name=name)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        unknown = set(data) - _FIELDS
        if unknown:
            raise ModelConfigError(f"unknown policy fields: {sorted(unknown)}")
        return cls(**{k: _coerce(k, v) if k != "name" else v for k, v in data.items()})

    def to_spec(self) -> str:
        """``k=v,k=v`` of every behaviour field (round-trips through :meth:`with_overrides`)."""
        return ",".join(f"{k}={v}" for k, v in self.to_dict().items() if k != "name")


_FIELDS = frozenset(f.name for f in dataclasses.fields(Policy))

#: The behaviour fields in declaration order: the one spelling of kernel-model.md section 7 (plus the
#: fields the captures added), for validation outside the engine (the web's policy field).
POLICY_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Policy)
                                       if f.name != "name")
_INT_FIELDS = frozenset({"max_plug_count", "max_sectors_cap_kb"})


def _coerce(key: str, value: Any) -> Any:
    if key in _INT_FIELDS and not isinstance(value, int):
        try:
            return int(str(value).strip())
        except ValueError:
            raise ModelConfigError(f"policy {key}={value!r}: expected a number") from None
    if key == "bio_build":
        return str(value).strip()
    return value if isinstance(value, int) else str(value).strip()


def _check_bio_build(value: Any) -> None:
    if not isinstance(value, str):
        raise ModelConfigError(f"policy bio_build={value!r}: expected a string")
    if value in ("uncapped", "cap_max_sectors"):
        return
    if value.startswith("align:"):
        n = _parse_size(value[6:])
        if n <= 0 or n % 512:
            raise ModelConfigError(f"policy bio_build={value}: N must be a positive multiple "
                                   "of 512 bytes")
        return
    raise ModelConfigError(f"policy bio_build={value!r}: expected uncapped | cap_max_sectors | "
                           "align:<bytes>")


def _parse_size(text: str) -> int:
    """``262144``, ``256k``, ``1m`` -> bytes (ModelConfigError otherwise)."""
    t = text.strip().lower()
    mult = 1
    for suffix, m in (("kib", 1024), ("kb", 1024), ("k", 1024), ("mib", 1 << 20),
                      ("mb", 1 << 20), ("m", 1 << 20), ("gib", 1 << 30), ("g", 1 << 30)):
        if t.endswith(suffix):
            t = t[: -len(suffix)]
            mult = m
            break
    try:
        return int(t) * mult
    except ValueError:
        raise ModelConfigError(f"bad size {text!r}") from None


parse_size = _parse_size


def field_help() -> dict[str, str]:
    """One line per policy field: the first sentence of its entry in :class:`Policy`'s
    docstring (what the upload form shows beside each choice)."""
    doc = Policy.__doc__ or ""
    out: dict[str, str] = {}
    current = ""
    for line in doc.split("Attributes:", 1)[-1].splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        head, sep, rest = stripped.partition(": ")
        names = [h.strip() for h in head.split(",")]
        if sep and all(n in POLICY_FIELDS or n == "name" for n in names) and len(line) - len(
                line.lstrip()) == 8:
            for n in names:
                out[n] = rest
            current = names[-1]
        elif current:
            out[current] = f"{out[current]} {stripped}"
    return {k: (v.split(". ")[0].rstrip(".") + ".") for k, v in out.items() if k != "name"}
