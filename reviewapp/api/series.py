"""/api/v1/series/ and /api/v1/patches/: create from an mbox, list with filters, detail, relink,
the patches' checks (Patchwork's checks API) and the series' rolled-up checks."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewapp import constants as c
from reviewapp.api.base import ErrorSerializer
from reviewapp.api.pagination import Pagination, paginated
from reviewapp.api.serializers import absolute
from reviewapp.models import Check, Patch, Series
from reviewapp.selectors import (
    check_rollup,
    patch_checks_with_comparison,
    patch_get_for_user,
    patch_list_for_user,
    series_get_for_user,
    series_list_for_user,
    series_versions,
)
from reviewapp.services import NotAllowed, UploadRejected
from reviewapp.services.checks import check_create
from reviewapp.services.series import read_mail_upload, series_create_from_mail, series_relink

# --- output shapes -----------------------------------------------------------------------

class PatchBriefOutput(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    api_url = serializers.SerializerMethodField()

    class Meta:
        model = Patch
        fields = ["id", "series", "position", "title", "version", "version_number", "author",
                  "message_id", "state", "url", "api_url"]

    def get_url(self, obj: Patch) -> str:
        return absolute(self.context.get("request"), obj.get_absolute_url())

    def get_api_url(self, obj: Patch) -> str:
        return absolute(self.context.get("request"),
                        reverse("api-patch-detail", kwargs={"version": "v1", "pk": obj.pk}))


class TrailerField(serializers.ListField):
    child = serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2)


class FixedPatchOutput(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    version = serializers.CharField(allow_blank=True)
    commit = serializers.CharField(allow_blank=True)
    url = serializers.CharField()


class FixedComparisonOutput(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    created = serializers.DateTimeField()
    url = serializers.CharField()
    baseline_bundles = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="its patched runs you may use: pass them as `baseline` to POST "
                  "/api/v1/comparisons/ (the kernel with the fixed commit)")


class FixesMatchOutput(serializers.Serializer):
    """One ``Fixes:`` tag that names a known patch (reviewapp.selectors.fixes_matches)."""

    fixes = serializers.CharField(help_text="the tag as written")
    sha = serializers.CharField(allow_blank=True)
    subject = serializers.CharField(allow_blank=True)
    match = serializers.ChoiceField(
        choices=["sha", "sha-subject-differs", "subject"],
        help_text="how the fixed patch was found: its commit id starts with the tag's sha (at "
                  "least 12 hex digits), or its title is the quoted subject")
    patch = FixedPatchOutput()
    comparisons = FixedComparisonOutput(many=True, help_text="newest first, at most 10")


class PatchDetailOutput(PatchBriefOutput):
    trailers = TrailerField(help_text="[[key, value], ...] in message order")
    fixes = serializers.ListField(child=serializers.CharField())
    references = serializers.ListField(child=serializers.CharField())
    checks_url = serializers.SerializerMethodField()
    fixes_matches = serializers.SerializerMethodField(
        help_text="the known patches this one's Fixes: tags name, with their comparisons as "
                  "baseline candidates (Fixes:-aware pairing)")

    class Meta(PatchBriefOutput.Meta):
        fields = PatchBriefOutput.Meta.fields + [
            "author_email", "date", "in_reply_to", "references", "base_commit", "commit",
            "fixes", "fixes_matches", "trailers", "body", "diffstat", "diff", "insertions",
            "deletions", "public", "created", "checks_url"]

    @extend_schema_field(FixesMatchOutput(many=True))
    def get_fixes_matches(self, obj: Patch) -> list[dict[str, Any]]:
        from reviewapp.selectors import fixes_matches_data, fixes_offers

        request = self.context.get("request")
        user = getattr(request, "user", None)
        return fixes_matches_data(fixes_offers(obj, user), user,
                                  lambda path: absolute(request, path))

    def get_checks_url(self, obj: Patch) -> str:
        return absolute(self.context.get("request"),
                        reverse("api-patch-checks", kwargs={"version": "v1", "pk": obj.pk}))


class SeriesOutput(serializers.ModelSerializer):
    patches = PatchBriefOutput(many=True, read_only=True)
    url = serializers.SerializerMethodField()
    api_url = serializers.SerializerMethodField()
    versions = serializers.SerializerMethodField()

    class Meta:
        model = Series
        fields = ["id", "title", "version", "version_tag", "tree", "author", "author_email",
                  "message_id", "in_reply_to", "description", "total", "date", "base_commit",
                  "change_id", "previous", "link_reason", "public", "created", "patches",
                  "versions", "url", "api_url"]

    def get_url(self, obj: Series) -> str:
        return absolute(self.context.get("request"), obj.get_absolute_url())

    def get_api_url(self, obj: Series) -> str:
        return absolute(self.context.get("request"),
                        reverse("api-series-detail", kwargs={"version": "v1", "pk": obj.pk}))

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_versions(self, obj: Series) -> list[dict[str, Any]]:
        request = self.context.get("request")
        if not self.context.get("with_versions"):
            return []
        return [{"id": s.pk, "version": s.version, "version_tag": s.version_tag}
                for s in series_versions(obj, getattr(request, "user", None))]


class CheckOutputPw(serializers.Serializer):
    """One check, Patchwork's shape (plus the patch id and who posted it)."""

    id = serializers.IntegerField(allow_null=True)
    patch = serializers.IntegerField()
    user = serializers.CharField(allow_null=True)
    context = serializers.CharField()
    state = serializers.ChoiceField(choices=c.CHECK_STATES)
    description = serializers.CharField(allow_blank=True)
    target_url = serializers.CharField(allow_blank=True)
    created = serializers.DateTimeField()


def check_data(chk: Any, patch: Patch, request: Any) -> dict[str, Any]:
    target = chk.target_url or ""
    if target.startswith("/"):
        target = absolute(request, target)
    return {"id": chk.id, "patch": patch.pk,
            "user": chk.user.get_username() if chk.user is not None else None,
            "context": chk.context, "state": chk.state, "description": chk.description,
            "target_url": target, "created": chk.created}


class CheckInput(serializers.Serializer):
    context = serializers.SlugField(max_length=100, help_text="e.g. ci-blktrace-md")
    state = serializers.ChoiceField(choices=c.CHECK_STATES)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    target_url = serializers.URLField(required=False, allow_blank=True, max_length=500)


class SeriesChecksOutput(serializers.Serializer):
    series = serializers.IntegerField()
    state = serializers.ChoiceField(choices=c.CHECK_STATES, allow_null=True,
                                    help_text="worst current check of any patch (null: none)")
    patches = serializers.ListField(child=serializers.DictField())


class SeriesCreateInput(serializers.Serializer):
    mbox = serializers.FileField(required=False, help_text="git format-patch output or an mbox")
    text = serializers.CharField(required=False, allow_blank=True, max_length=20 * 1024 * 1024,
                                 help_text="the same, as text (JSON clients)")
    public = serializers.BooleanField(required=False, default=True)


class RelinkInput(serializers.Serializer):
    previous = serializers.IntegerField(allow_null=True, help_text="earlier version; null unlinks")


# --- filters -----------------------------------------------------------------------------

class SeriesFilter(django_filters.FilterSet):
    version = django_filters.NumberFilter()
    author = django_filters.CharFilter(field_name="author", lookup_expr="icontains")
    message_id = django_filters.CharFilter(method="by_msgid")
    change_id = django_filters.CharFilter()
    title = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Series
        fields = ["version", "author", "message_id", "change_id", "title"]

    def by_msgid(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        return qs.filter(message_id=value.strip().strip("<>"))


class PatchFilter(django_filters.FilterSet):
    series = django_filters.NumberFilter(field_name="series_id")
    version = django_filters.NumberFilter(field_name="version_number")
    author = django_filters.CharFilter(field_name="author", lookup_expr="icontains")
    state = django_filters.ChoiceFilter(choices=c.PATCH_STATES)
    message_id = django_filters.CharFilter(method="by_msgid")

    class Meta:
        model = Patch
        fields = ["series", "version", "author", "state", "message_id"]

    def by_msgid(self, qs: QuerySet, name: str, value: str) -> QuerySet:
        return qs.filter(message_id=value.strip().strip("<>"))


# --- views -------------------------------------------------------------------------------

class SeriesListCreateApi(generics.ListAPIView):
    """List series (filters: version, author, message_id, change_id, title) or create one
    from an mbox (multipart ``mbox`` file, or JSON/form ``text``)."""

    serializer_class = SeriesOutput
    pagination_class = Pagination
    filterset_class = SeriesFilter
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    @extend_schema(operation_id="series_list",
                   responses={200: SeriesOutput(many=True), 400: ErrorSerializer})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Series]:
        return series_list_for_user(self.request.user).prefetch_related("patches").order_by(
            "-created", "-pk")

    @extend_schema(operation_id="series_create",
                   request={"multipart/form-data": SeriesCreateInput,
                            "application/json": SeriesCreateInput},
                   responses={201: SeriesOutput, 400: ErrorSerializer, 401: ErrorSerializer,
                              409: ErrorSerializer})
    def post(self, request: Request, version: str) -> Response:
        if not request.user.is_authenticated:
            raise NotAllowed("log in (or send a token) to create a series")
        ser = SeriesCreateInput(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        if d.get("mbox") is not None:
            data, field = read_mail_upload(d["mbox"]), "mbox"
        elif (d.get("text") or "").strip():
            data, field = d["text"].encode("utf-8", "surrogateescape"), "text"
        else:
            raise UploadRejected("give the series as an 'mbox' file or as 'text'", field="mbox")
        series = series_create_from_mail(data=data, user=request.user, public=d["public"],
                                         field=field)
        return Response(SeriesOutput(series, context={"request": request,
                                                      "with_versions": True}).data, status=201)


class SeriesDetailApi(APIView):
    @extend_schema(operation_id="series_retrieve",
                   responses={200: SeriesOutput, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        series = series_get_for_user(pk=pk, user=request.user)
        return Response(SeriesOutput(series, context={"request": request,
                                                      "with_versions": True}).data)


class SeriesRelinkApi(APIView):
    @extend_schema(operation_id="series_relink", request=RelinkInput,
                   responses={200: SeriesOutput, 400: ErrorSerializer, 403: ErrorSerializer,
                              404: ErrorSerializer})
    def post(self, request: Request, version: str, pk: int) -> Response:
        from reviewapp.access import series_for_writer

        # access before input: 404 unreadable, 403 readable only (reviewapp.access)
        series = series_for_writer(pk=pk, user=request.user)
        ser = RelinkInput(data=request.data)
        ser.is_valid(raise_exception=True)
        prev_id = ser.validated_data.get("previous")
        previous = None
        if prev_id:
            previous = series_list_for_user(request.user).filter(pk=prev_id).first()
            if previous is None:
                raise UploadRejected(f"previous: no series #{prev_id}", field="previous")
        series_relink(series=series, previous=previous, user=request.user)
        return Response(SeriesOutput(series, context={"request": request,
                                                      "with_versions": True}).data)


class SeriesChecksApi(APIView):
    """Each patch's current checks and the series' roll-up (the worst state wins)."""

    @extend_schema(operation_id="series_checks",
                   responses={200: SeriesChecksOutput, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        series = series_get_for_user(pk=pk, user=request.user)
        patches = []
        states = []
        for p in series.patches.order_by("position", "pk"):
            checks = patch_checks_with_comparison(p, request.user)
            states += [chk.state for chk in checks]
            patches.append({"patch": p.pk, "position": p.position,
                            "state": check_rollup([chk.state for chk in checks]),
                            "checks": [check_data(chk, p, request) for chk in checks]})
        return Response({"series": series.pk, "state": check_rollup(states),
                         "patches": patches})


class PatchListApi(generics.ListAPIView):
    """Patches (filters: series, version, author, state, message_id)."""

    serializer_class = PatchBriefOutput
    pagination_class = Pagination
    filterset_class = PatchFilter

    @extend_schema(operation_id="patches_list",
                   responses={200: PatchBriefOutput(many=True), 400: ErrorSerializer})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Patch]:
        return patch_list_for_user(self.request.user).order_by("-created", "-pk")


class PatchStateInput(serializers.Serializer):
    state = serializers.ChoiceField(choices=c.PATCH_STATES)


class PatchDetailApi(APIView):
    @extend_schema(operation_id="patch_retrieve",
                   responses={200: PatchDetailOutput, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        patch = patch_get_for_user(pk=pk, user=request.user)
        return Response(PatchDetailOutput(patch, context={"request": request}).data)

    @extend_schema(operation_id="patch_state_update", request=PatchStateInput,
                   responses={200: PatchDetailOutput, 400: ErrorSerializer,
                              401: ErrorSerializer, 403: ErrorSerializer,
                              404: ErrorSerializer})
    def patch(self, request: Request, version: str, pk: int) -> Response:
        """Change the review state (the patch's submitter, write grants, staff, and members
        of the maintainers group, settings.BLKREVIEW_MAINTAINERS_GROUP)."""
        from reviewapp.access import patch_for_state_setter
        from reviewapp.services.checks import patch_state_set

        patch = patch_for_state_setter(pk=pk, user=request.user)  # access before input
        ser = PatchStateInput(data=request.data)
        ser.is_valid(raise_exception=True)
        patch_state_set(patch=patch, user=request.user, state=ser.validated_data["state"])
        return Response(PatchDetailOutput(patch, context={"request": request}).data)


class PatchChecksApi(APIView):
    """Patchwork's checks API: bots POST a check (context, state, description, target_url);
    GET lists the current check per (user, context), the comparison's own check included as
    context ``blkreview-comparison``. Posting needs a token with the ``check`` scope."""

    token_scopes = {"POST": "check"}
    pagination_class = Pagination

    @extend_schema(operation_id="patch_checks_list",
                   responses={200: CheckOutputPw(many=True), 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        patch = patch_get_for_user(pk=pk, user=request.user)
        return paginated(self, request, patch_checks_with_comparison(patch, request.user),
                         lambda page: [check_data(chk, patch, request) for chk in page])

    @extend_schema(operation_id="patch_checks_create", request=CheckInput,
                   responses={201: CheckOutputPw, 400: ErrorSerializer, 401: ErrorSerializer,
                              403: ErrorSerializer, 404: ErrorSerializer})
    def post(self, request: Request, version: str, pk: int) -> Response:
        patch = patch_get_for_user(pk=pk, user=request.user)
        ser = CheckInput(data=request.data)
        ser.is_valid(raise_exception=True)
        chk: Check = check_create(patch=patch, user=request.user, **ser.validated_data)
        return Response(check_data(chk, patch, request), status=201)
