"""/api/v1/ threads and comments: list and start threads on a comparison or patch, read one,
reply, resolve/reopen (the same services as the pages)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewapp import constants as c
from reviewapp.api.base import ErrorSerializer
from reviewapp.api.pagination import Pagination
from reviewapp.api.serializers import absolute
from reviewapp.markup import render_markdown
from reviewapp.models import Comment, Thread
from reviewapp.selectors import comparison_get_for_user, patch_get_for_user, thread_get_for_user
from reviewapp.services.threads import comment_create, thread_create, thread_set_resolved


class CommentOutput(serializers.ModelSerializer):
    author = serializers.CharField(source="author.get_username")
    body = serializers.SerializerMethodField(help_text="Markdown as typed ('' when deleted)")
    html = serializers.SerializerMethodField(help_text="sanitized HTML")
    url = serializers.SerializerMethodField()

    class Meta:
        model = Comment
        fields = ["id", "thread", "author", "body", "html", "created", "edited", "deleted", "url"]

    def get_body(self, obj: Comment) -> str:
        return "" if obj.deleted else obj.body

    def get_html(self, obj: Comment) -> str:
        return "" if obj.deleted else str(render_markdown(obj.body))

    def get_url(self, obj: Comment) -> str:
        return absolute(self.context.get("request"), obj.get_absolute_url())


class ThreadOutput(serializers.ModelSerializer):
    comments = CommentOutput(many=True, read_only=True)
    anchor = serializers.DictField()
    anchor_numbers = serializers.DictField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = Thread
        fields = ["id", "comparison", "patch", "title", "anchor_kind", "anchor", "anchor_label",
                  "anchor_numbers", "resolved", "resolved_at", "created", "comments", "url"]

    def get_url(self, obj: Thread) -> str:
        return absolute(self.context.get("request"), obj.get_absolute_url())


class ThreadInput(serializers.Serializer):
    anchor_kind = serializers.ChoiceField(choices=c.ANCHOR_KINDS, default=c.ANCHOR_COMPARISON)
    anchor = serializers.DictField(required=False, default=dict,
                                   help_text="chart: section, dev, stage, chart, side, bucket "
                                             "or x0/x1, values; metric: section, dev, stage, "
                                             "metric; diff: line")
    title = serializers.CharField(required=False, allow_blank=True, max_length=200)
    body = serializers.CharField(max_length=20000)


class ReplyInput(serializers.Serializer):
    body = serializers.CharField(max_length=20000)


class ResolveInput(serializers.Serializer):
    resolved = serializers.BooleanField(default=True)


def _threads(qs: QuerySet[Thread]) -> QuerySet[Thread]:
    return (qs.filter(comments__isnull=False).distinct()
            .prefetch_related("comments__author").order_by("created", "pk"))


class _ThreadList(generics.ListAPIView):
    serializer_class = ThreadOutput
    queryset = Thread.objects.none()
    pagination_class = Pagination

    def start(self, request: Request, **target: Any) -> Response:
        ser = ThreadInput(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        thread = thread_create(user=request.user, body=d["body"], anchor_kind=d["anchor_kind"],
                               anchor=d.get("anchor") or {}, title=d.get("title", ""), **target)
        return Response(ThreadOutput(thread, context={"request": request}).data, status=201)


class ComparisonThreadsApi(_ThreadList):
    """Threads on a comparison (general, chart regions, metric rows)."""

    @extend_schema(operation_id="comparison_threads_list",
                   responses={200: ThreadOutput(many=True), 404: ErrorSerializer})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Thread]:
        if getattr(self, "swagger_fake_view", False):
            return Thread.objects.none()
        cmp = comparison_get_for_user(pk=self.kwargs["pk"], user=self.request.user)
        return _threads(Thread.objects.filter(comparison=cmp))

    @extend_schema(operation_id="comparison_threads_create", request=ThreadInput,
                   responses={201: ThreadOutput, 400: ErrorSerializer, 401: ErrorSerializer,
                              404: ErrorSerializer})
    def post(self, request: Request, version: str, pk: int) -> Response:
        return self.start(request, comparison=comparison_get_for_user(pk=pk, user=request.user))


class PatchThreadsApi(_ThreadList):
    """Threads on a patch (diff lines, or the patch as a whole)."""

    @extend_schema(operation_id="patch_threads_list",
                   responses={200: ThreadOutput(many=True), 404: ErrorSerializer})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Thread]:
        if getattr(self, "swagger_fake_view", False):
            return Thread.objects.none()
        patch = patch_get_for_user(pk=self.kwargs["pk"], user=self.request.user)
        return _threads(Thread.objects.filter(patch=patch, comparison__isnull=True))

    @extend_schema(operation_id="patch_threads_create", request=ThreadInput,
                   responses={201: ThreadOutput, 400: ErrorSerializer, 401: ErrorSerializer,
                              404: ErrorSerializer})
    def post(self, request: Request, version: str, pk: int) -> Response:
        return self.start(request, patch=patch_get_for_user(pk=pk, user=request.user))


class ThreadDetailApi(APIView):
    @extend_schema(operation_id="thread_retrieve",
                   responses={200: ThreadOutput, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        thread = thread_get_for_user(pk=pk, user=request.user)
        return Response(ThreadOutput(thread, context={"request": request}).data)


class ThreadCommentsApi(APIView):
    @extend_schema(operation_id="thread_reply", request=ReplyInput,
                   responses={201: CommentOutput, 400: ErrorSerializer, 401: ErrorSerializer,
                              404: ErrorSerializer})
    def post(self, request: Request, version: str, pk: int) -> Response:
        thread = thread_get_for_user(pk=pk, user=request.user)
        ser = ReplyInput(data=request.data)
        ser.is_valid(raise_exception=True)
        comment = comment_create(user=request.user, thread=thread, body=ser.validated_data["body"])
        return Response(CommentOutput(comment, context={"request": request}).data, status=201)


class ThreadResolveApi(APIView):
    @extend_schema(operation_id="thread_resolve", request=ResolveInput,
                   responses={200: ThreadOutput, 401: ErrorSerializer, 403: ErrorSerializer,
                              404: ErrorSerializer})
    def post(self, request: Request, version: str, pk: int) -> Response:
        from django.core.exceptions import PermissionDenied

        from reviewapp.services.threads import can_resolve

        thread = thread_get_for_user(pk=pk, user=request.user)
        if not can_resolve(thread, request.user):  # access before input (403)
            raise PermissionDenied("only the thread's starter or whoever may change its "
                                   "comparison or patch can resolve it")
        ser = ResolveInput(data=request.data)
        ser.is_valid(raise_exception=True)
        thread_set_resolved(thread=thread, user=request.user,
                            resolved=ser.validated_data["resolved"])
        return Response(ThreadOutput(thread, context={"request": request}).data)
