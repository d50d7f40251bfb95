"""The upload form speaks the reviewer's language (issue 9): known policies as choices (field,
old -> new, which kernel, what it does), the presets' differences preselected from the two
kernels, and a stack spec builder."""

from __future__ import annotations

import pytest
from django.urls import reverse

from reviewapp.forms import policy_options
from reviewapp.models import Comparison
from workers.model.policy import POLICY_FIELDS, field_help
from workers.model.presets import policy_choices, preset_difference

pytestmark = pytest.mark.django_db


def test_engine_offers_every_change_point_with_kernel_and_help():
    choices = {(c["value"], c["kernel"]): c for c in policy_choices()}
    head = choices[("split_remainder=head", "6.18")]
    assert head["old"] == "tail" and "b2f5974079d8" in head["what"]
    assert ("plug_order=fifo", "6.12.25") in choices
    helps = field_help()
    assert set(helps) == set(POLICY_FIELDS)
    assert helps["split_remainder"].startswith("where ``bio_submit_split`` puts the remainder")
    assert preset_difference("6.17", "6.18") == ["split_remainder=head", "dio_bio_limit=pages"]
    assert "split_remainder=head" in preset_difference("6.1.0-57-amd64", "7.2.13+deb14-amd64")
    assert preset_difference("not a kernel", "6.18") == []
    assert all(o["field"] in POLICY_FIELDS for o in policy_options())


def test_upload_page_lists_policies_and_the_stack_builder(logged_in_client):
    html = logged_in_client.get(reverse("upload")).content.decode()
    assert 'value="split_remainder=head@6.18"' in html
    assert "split_remainder</code>: tail → <strong>head</strong>" in html
    assert "kernel 6.18: b2f5974079d8" in html
    assert 'value="bio_build=cap_max_sectors@patch"' in html  # seed 001's own policy
    assert 'id="stack-builder"' in html and '<option value="raid5" selected>' in html
    assert '<option value="nvme">' in html  # device types from the engine's presets
    assert "reviewapp/upload.js" in html


def test_preset_diff_endpoint(client):
    r = client.get(reverse("upload-preset-diff"), {"baseline": "6.17.13", "patched": "6.18.15"})
    assert r.json() == {"values": ["split_remainder=head", "dio_bio_limit=pages"]}
    assert client.get(reverse("upload-preset-diff"), {"baseline": "x"}).json() == {"values": []}


def _post(client, make_upload, seed000_before, seed000_after, **extra):
    data = {"title": "block: split bios at the head", "public": "on",
            "baseline_files": make_upload("before.txt", seed000_before),
            "patched_files": make_upload("after.txt", seed000_after)}
    data.update(extra)
    return client.post(reverse("upload"), data)


def test_chosen_policies_and_other_values_make_the_policy(logged_in_client, make_upload,
                                                          seed000_before, seed000_after):
    r = _post(logged_in_client, make_upload, seed000_before, seed000_after,
              policy_choices=["split_remainder=head@6.18", "plug_order=fifo@6.12.25"],
              policy="bio_build=align:131072")
    assert r.status_code == 302
    c = Comparison.objects.get()
    assert c.policy == "split_remainder=head,plug_order=fifo,bio_build=align:131072"


def test_the_same_field_twice_is_a_form_error(logged_in_client, make_upload, seed000_before,
                                              seed000_after):
    r = _post(logged_in_client, make_upload, seed000_before, seed000_after,
              policy_choices=["plug_order=lifo@5.16", "plug_order=fifo@6.12.25"])
    assert r.status_code == 400 and not Comparison.objects.exists()
    assert "plug_order is chosen twice: lifo and fifo" in r.content.decode()
    r = _post(logged_in_client, make_upload, seed000_before, seed000_after,
              policy_choices=["split_remainder=head@6.18"], policy="split_remainder=tail")
    assert r.status_code == 400 and "split_remainder is also chosen above as head" in \
        r.content.decode()
    r = _post(logged_in_client, make_upload, seed000_before, seed000_after,
              policy_choices=["nonsense=1@9.9"])
    assert r.status_code == 400 and not Comparison.objects.exists()
