"""Forms of the pages (upload, comment, API token). CSRF is on for all of them."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm

from reviewapp import constants as c


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one input (Django's documented pattern)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(d, initial) for d in data if d]
        return [single(data, initial)] if data else []


#: Help of both sides' file fields (the same formats on either side).
FILES_HELP = ("Several files (blkparse text, per-CPU blktrace binaries, ftrace, bpftrace, "
              "iostat -x, fio JSON, a blkreview.toml manifest) or one .tar/.tar.gz/.tar.xz/"
              ".tar.zst/.zip bundle. An idle CPU's empty .blktrace.N is fine.")


def policy_options() -> list[dict[str, str]]:
    """The known policies as the upload form offers them: every kernel change point of the
    engine's presets (field, old -> new, which kernel) and the seed patches' own policies, each
    with one line on what the field does (``workers.model.policy.field_help``)."""
    from workers.model.policy import POLICY_FIELDS, field_help
    from workers.model.presets import extra_policy_choices, policy_choices

    helps = field_help()
    out = []
    for ch in policy_choices() + extra_policy_choices():
        if ch["field"] not in POLICY_FIELDS:
            continue
        where = f"kernel {ch['kernel']}" if ch["kernel"] else "patch, in no kernel"
        out.append({"key": f"{ch['value']}@{ch['kernel'] or 'patch'}", "value": ch["value"],
                    "field": ch["field"], "old": str(ch["old"]), "new": str(ch["new"]),
                    "label": f"{ch['field']}: {ch['old']} → {ch['new']} ({where})",
                    "help": helps.get(ch["field"], "").replace("``", ""),
                    "what": ch["what"], "kernel": ch["kernel"]})
    return out


#: The upload form's visibility choice, in words ("on" is what a checkbox posted before).
VISIBILITY_CHOICES = (
    ("on", "Public: anyone, without logging in, can read the page, the report, the results "
           "and the discussion"),
    ("off", "Private: only you, the people and groups you share it with, and staff"),
)


def visibility_initial(public: bool) -> str:
    """The form's initial choice for a public flag."""
    return "on" if public else "off"


class UploadForm(forms.Form):
    """Patch metadata, optional patch mail, both sides' files and the test setup."""

    title = forms.CharField(max_length=300, required=False,
                            help_text="Patch title; taken from the patch mail when left empty.")
    version = forms.CharField(max_length=40, required=False, help_text="v2, V3, RFC ...")
    author = forms.CharField(max_length=200, required=False)
    mbox = forms.FileField(required=False, label="Patch mail (mbox)",
                           help_text="git format-patch output or an mbox: fills title, version, "
                                     "author, Message-ID, base commit and Fixes: tags.")
    baseline_files = MultipleFileField(required=False, label="Baseline traces",
                                       help_text=FILES_HELP)
    baseline_kernel = forms.CharField(max_length=100, required=False, label="Baseline kernel",
                                      help_text="uname -r without the patch, e.g. 6.17.13")
    patched_files = MultipleFileField(required=False, label="Patched traces",
                                      help_text=FILES_HELP)
    patched_kernel = forms.CharField(max_length=100, required=False, label="Patched kernel",
                                     help_text="uname -r with the patch, e.g. 6.17.13+")
    stack = forms.CharField(required=False, label="Device stack",
                            widget=forms.Textarea(attrs={"rows": 2}),
                            help_text="for the model, a stack spec: e.g. "
                                      "raid5:disks=8,chunk=64k,device=hdd (kinds disk, raid0, "
                                      "raid5, linear, cache; member sysfs limits as key=value, "
                                      "md_<limit> for the array). Free text is shown as written; "
                                      "a blkreview.toml manifest in the bundle wins")
    limits = forms.CharField(required=False, label="Queue limits",
                             widget=forms.Textarea(attrs={"rows": 2}),
                             help_text="e.g. md0 max_sectors_kb=1024; sd* max_sectors_kb=1280 "
                                       "nr_requests=256 scheduler=none (shown to reviewers; the "
                                       "model reads limits from the manifest or the stack spec)")
    workload = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                               help_text="e.g. dd if=/dev/md0 of=/dev/null bs=4480k iflag=direct")
    policy = forms.CharField(max_length=300, required=False, label="Other policy values",
                             help_text="field=value,... for a value not offered above, e.g. "
                                       "bio_build=align:131072")
    policy_choices = forms.MultipleChoiceField(
        required=False, label="Policies under test", widget=forms.CheckboxSelectMultiple,
        help_text="what the patch changes, as the model knows it; the presets' differences "
                  "between the two kernels are preselected")
    thresholds = forms.CharField(max_length=500, required=False, label="Check thresholds",
                                 help_text="override the CI check's defaults, e.g. "
                                           "throughput_drop_fail_pct=5,latency_rise_warn_pct=20")
    public = forms.TypedChoiceField(
        required=False, label="Who can read this comparison", widget=forms.RadioSelect,
        choices=VISIBILITY_CHOICES, coerce=lambda v: v == "on", empty_value=False,
        help_text="You can change it later on the comparison's page (Sharing).")
    strict = forms.BooleanField(required=False, label="Strict parsing",
                                help_text="Fail the analysis on a damaged blktrace record "
                                          "instead of skipping it with a warning (also "
                                          "strict = true in a blkreview.toml).")
    patch = forms.IntegerField(required=False, widget=forms.HiddenInput,
                               help_text="an existing patch (of a series) this comparison is for")
    baseline_from = forms.IntegerField(
        required=False, label="Baseline from the fixed commit",
        help_text="use the patched runs of this comparison (of the patch named by Fixes:) as "
                  "the baseline instead of uploading baseline files")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.policy_options = policy_options()
        self.fields["policy_choices"].choices = [(o["key"], o["label"])
                                                 for o in self.policy_options]

    def clean_policy_choices(self) -> list[str]:
        return list(self.cleaned_data.get("policy_choices") or [])

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        merged: dict[str, str] = {}
        for key in data.get("policy_choices") or []:
            field, _, value = key.split("@", 1)[0].partition("=")
            if field in merged and merged[field] != value:
                self.add_error("policy_choices", f"{field} is chosen twice: {merged[field]} and "
                               f"{value}; keep one")
            merged[field] = value
        text = str(data.get("policy") or "")
        body = text.split(": ", 1)[1] if ": " in text else text
        for part in body.split(","):
            if "=" in part:
                field, _, value = part.strip().partition("=")
                if field in merged and merged[field] != value:
                    self.add_error("policy", f"{field} is also chosen above as {merged[field]}")
                merged[field] = value
            elif part.strip():
                merged[part.strip()] = ""  # the policy check says what is wrong with it
        if data.get("policy_choices"):
            data["policy"] = ",".join(f"{k}={v}" if v else k for k, v in merged.items())
        if not data.get("baseline_files") and not data.get("baseline_from"):
            self.add_error("baseline_files", "Upload at least one baseline file.")
        if not data.get("patched_files"):
            self.add_error("patched_files", "Upload at least one patched file.")
        if not data.get("title") and not data.get("mbox") and not data.get("patch"):
            self.add_error("title", "Give the patch title or upload its mail.")
        return data


class CommentForm(forms.Form):
    body = forms.CharField(label="Comment", widget=forms.Textarea(attrs={"rows": 4}),
                           max_length=20000)


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What will use it, e.g. 'CI bot for md'.")
    scopes = forms.MultipleChoiceField(
        choices=c.TOKEN_SCOPES, widget=forms.CheckboxSelectMultiple,
        initial=list(c.TOKEN_SCOPE_NAMES),
        help_text="What requests made with it may do; a read-only token cannot upload.")
    expires_in_days = forms.IntegerField(
        required=False, min_value=1, max_value=3650, label="Expires in (days)",
        help_text="Leave empty for a token that works until you revoke it.")


class AddRunsForm(forms.Form):
    side = forms.ChoiceField(choices=c.ROLES)
    files = MultipleFileField(required=True, label="Trace files")
    kernel = forms.CharField(max_length=100, required=False)


class LoginLimitMixin:
    """Failed logins are counted per username and client IP; past the limit the form refuses
    every attempt, the right password included, and says when to retry (issue 10 item 11)."""

    locked = False

    def clean(self) -> dict[str, Any]:
        from reviewapp.services.limits import (
            client_ip,
            lockout_message,
            login_failure_record,
            login_locked_until,
            login_success_record,
        )

        username = str(self.cleaned_data.get("username") or "")  # type: ignore[attr-defined]
        ip = client_ip(self.request)  # type: ignore[attr-defined]
        until = login_locked_until(username=username, ip=ip)
        if until is not None:
            self.locked = True
            raise forms.ValidationError(lockout_message(until), code="locked")
        try:
            data: dict[str, Any] = super().clean()  # type: ignore[misc]
        except forms.ValidationError:
            if username:
                until = login_failure_record(username=username, ip=ip)
                if until is not None:
                    self.locked = True
                    raise forms.ValidationError(lockout_message(until), code="locked") from None
            raise
        login_success_record(username=username, ip=ip)
        return data


class LimitedAuthenticationForm(LoginLimitMixin, AuthenticationForm):
    """The login page's form."""


class LimitedAdminAuthenticationForm(LoginLimitMixin, AdminAuthenticationForm):
    """The admin's login form (same counters)."""


#: Levels of a mechanism rule, as the check reads them (workers.compare.Thresholds.rule_*).
RULE_LEVELS = (("0", "off"), ("1", "warning"), ("2", "fail"))


class RulesForm(forms.Form):
    """The check's mechanism rules of one comparison: one choice (off / warning / fail) each.

    Built from ``workers.compare.Thresholds().rules()`` so a new rule appears here by itself.
    """

    def __init__(self, *args: Any, rules: list[dict[str, Any]] | None = None, **kwargs: Any
                 ) -> None:
        super().__init__(*args, **kwargs)
        from workers.compare import Thresholds

        for r in rules or Thresholds().rules():
            self.fields[r["name"]] = forms.ChoiceField(
                choices=RULE_LEVELS, label=r["rule"], initial=str(r["level"]))
class ShareForm(forms.Form):
    """The sharing panel of a comparison or patch (owner only): add or remove a grantee, or
    switch public/private."""

    action = forms.ChoiceField(choices=[("add", "add"), ("remove", "remove"),
                                        ("visibility", "visibility")], widget=forms.HiddenInput)
    name = forms.CharField(max_length=150, required=False, label="Share with",
                           help_text="a user name, or group:NAME for a group")
    level = forms.ChoiceField(choices=c.GRANT_LEVELS, required=False, initial=c.GRANT_READ)
    grant = forms.IntegerField(required=False, widget=forms.HiddenInput)
    public = forms.BooleanField(required=False)
