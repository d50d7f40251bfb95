"""Direct-I/O bio building (E6.1-E6.3) and the bio_build policies."""

from model_helpers import d_stream

from workers.model import bios_from_workload, preset_for_kernel, replay, stack_from_spec
from workers.model.build import build_bios, natural_bio_pages


def test_e6_1_fragmented_buffer_no_tail():
    """E6.1: fragmented buffer, max_sectors 1024: bio 0+2048 becomes 0+1024, 1024+1024."""
    t = replay(bios_from_workload("dd:bs=1m,count=1,contig=none"),
               stack_from_spec("disk:max_sectors_kb=512,device=nvme"), preset_for_kernel("6.1"))
    assert d_stream(t) == [("8,0", 0, 1024), ("8,0", 1024, 1024)]


def test_e6_2_one_page_join_leaves_a_tail():
    """E6.2: one join gives bio 0+2056 -> 1024, 1024, 8; the next bio starts at 2056."""
    b = build_bios([0], [4112], natural_bio_pages(joins=1), preset_for_kernel("6.1"),
                   max_sectors=1024)
    assert list(zip(b.sector.tolist(), b.nr_sectors.tolist())) == [(0, 2056), (2056, 2056)]
    t = replay(bios_from_workload("dd:bs=2056k,count=1,joins=1"),
               stack_from_spec("disk:max_sectors_kb=512,device=nvme"), preset_for_kernel("6.1"))
    # both bios share the dd read's plug, so under 6.1's LIFO the tail goes after 2056 (E3.1)
    assert sorted((s, n) for _, s, n in d_stream(t)) == [(0, 1024), (1024, 1024), (2048, 8),
                                                         (2056, 1024), (3080, 1024), (4104, 8)]


def test_e6_3_ed_tsai_bio_of_2144_sectors():
    """E6.3: 12 joins build Ed's 86925864+2144 bio, split into 1024, 1024 and a 96 tail."""
    b = build_bios([86925864], [2144 * 3], natural_bio_pages(joins=12), preset_for_kernel("6.1"),
                   max_sectors=1024)
    assert b.nr_sectors.tolist() == [2144, 2144, 2144]


def test_dio_bio_limit_pages_gives_1m_plus_tail_bio():
    """7.2 builds 1028k reads as 2048 + 8 (the tail is its own bio, not a split)."""
    b = build_bios([0], [2056], natural_bio_pages(joins=1), preset_for_kernel("7.2"),
                   max_sectors=1024)
    assert b.nr_sectors.tolist() == [2048, 8]


def test_cap_and_align_policies():
    """cap_max_sectors trims bios to multiples of max_sectors, align:N to multiples of N."""
    pages = natural_bio_pages(joins=9)  # 2120 sectors
    cap = build_bios([0], [20000], pages, preset_for_kernel("6.1").with_overrides(
        "bio_build=cap_max_sectors"), max_sectors=1024)
    assert all(n % 1024 == 0 for n in cap.nr_sectors[:-1].tolist())
    al = build_bios([0], [20000], pages, preset_for_kernel("6.1").with_overrides(
        "bio_build=align:131072"), max_sectors=1024)
    assert all(n % 256 == 0 for n in al.nr_sectors[:-1].tolist())
    assert int(al.nr_sectors.sum()) == int(cap.nr_sectors.sum()) == 20000
