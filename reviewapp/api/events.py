"""/api/v1/events/ (Patchwork-style polling: ``?since=<ISO time>``, ``?kind=``) and
/api/v1/webhooks/ (register a URL for event kinds; deliveries signed with HMAC-SHA256 and
retried with backoff; the delivery log per webhook)."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewapp import constants as c
from reviewapp.api.base import ErrorSerializer
from reviewapp.api.pagination import Pagination
from reviewapp.api.permissions import TokenScope
from reviewapp.models import Event, Webhook, WebhookDelivery
from reviewapp.selectors import event_list_for_user
from reviewapp.services.webhooks import event_payload, webhook_create, webhook_delete


class EventOutput(serializers.ModelSerializer):
    actor = serializers.SerializerMethodField()
    payload = serializers.DictField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = Event
        fields = ["id", "kind", "created", "actor", "series", "patch", "comparison", "payload",
                  "url"]

    def get_actor(self, obj: Event) -> str | None:
        return obj.actor.get_username() if obj.actor_id and obj.actor else None

    def get_url(self, obj: Event) -> str | None:
        url = event_payload(obj)["url"]
        return str(url) if url else None


class EventFilter(django_filters.FilterSet):
    since = django_filters.IsoDateTimeFilter(field_name="created", lookup_expr="gt",
                                             help_text="events after this time (ISO 8601)")
    before = django_filters.IsoDateTimeFilter(field_name="created", lookup_expr="lte")
    kind = django_filters.MultipleChoiceFilter(choices=c.EVENT_KINDS)
    series = django_filters.NumberFilter(field_name="series_id")
    patch = django_filters.NumberFilter(field_name="patch_id")
    comparison = django_filters.NumberFilter(field_name="comparison_id")

    class Meta:
        model = Event
        fields = ["since", "before", "kind", "series", "patch", "comparison"]


class EventListApi(generics.ListAPIView):
    """Events the caller may read, oldest first (poll with ``?since=`` the last one's time)."""

    serializer_class = EventOutput
    pagination_class = Pagination
    filterset_class = EventFilter

    @extend_schema(operation_id="events_list",
                   responses={200: EventOutput(many=True), 400: ErrorSerializer})
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Event]:
        return event_list_for_user(self.request.user).select_related(
            "actor", "series", "patch", "comparison").order_by("created", "pk")


class WebhookOutput(serializers.ModelSerializer):
    events = serializers.ListField(child=serializers.ChoiceField(choices=c.EVENT_KINDS))

    class Meta:
        model = Webhook
        fields = ["id", "url", "events", "active", "created"]


class WebhookCreatedOutput(WebhookOutput):
    secret = serializers.CharField(help_text="shown once: verify X-Blkreview-Signature with it")

    class Meta(WebhookOutput.Meta):
        fields = WebhookOutput.Meta.fields + ["secret"]


class WebhookInput(serializers.Serializer):
    url = serializers.URLField(max_length=500)
    events = serializers.ListField(child=serializers.ChoiceField(choices=c.EVENT_KINDS),
                                   required=False, default=list, help_text="empty: every kind")
    secret = serializers.CharField(required=False, allow_blank=True, min_length=16,
                                   max_length=100, help_text="generated when not given")


class DeliveryOutput(serializers.ModelSerializer):
    kind = serializers.CharField(source="event.kind")

    class Meta:
        model = WebhookDelivery
        fields = ["id", "event", "kind", "state", "attempts", "response_status", "error",
                  "created", "last_attempt"]


class WebhookListCreateApi(generics.ListAPIView):
    serializer_class = WebhookOutput
    pagination_class = Pagination
    permission_classes = [IsAuthenticated, TokenScope]

    @extend_schema(operation_id="webhooks_list",
                   responses={200: WebhookOutput(many=True), 401: ErrorSerializer})
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Webhook]:
        if getattr(self, "swagger_fake_view", False):
            return Webhook.objects.none()
        return Webhook.objects.filter(user=self.request.user).order_by("created", "pk")

    @extend_schema(operation_id="webhooks_create", request=WebhookInput,
                   responses={201: WebhookCreatedOutput, 400: ErrorSerializer,
                              401: ErrorSerializer})
    def post(self, request: Request, version: str) -> Response:
        ser = WebhookInput(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        hook = webhook_create(user=request.user, url=d["url"], events=d.get("events") or [],
                              secret=d.get("secret", ""))
        return Response(WebhookCreatedOutput(hook).data, status=201)


def _own_hook(request: Request, pk: int) -> Webhook:
    hook = Webhook.objects.filter(pk=pk, user=request.user).first()
    if hook is None:
        raise Http404("no such webhook")
    return hook


class WebhookDetailApi(APIView):
    permission_classes = [IsAuthenticated, TokenScope]

    @extend_schema(operation_id="webhooks_retrieve",
                   responses={200: WebhookOutput, 401: ErrorSerializer, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        return Response(WebhookOutput(_own_hook(request, pk)).data)

    @extend_schema(operation_id="webhooks_destroy",
                   responses={204: None, 401: ErrorSerializer, 404: ErrorSerializer})
    def delete(self, request: Request, version: str, pk: int) -> Response:
        webhook_delete(webhook=_own_hook(request, pk), user=request.user)
        return Response(status=204)


class WebhookDeliveriesApi(generics.ListAPIView):
    """The delivery log of one of the caller's webhooks, newest first."""

    serializer_class = DeliveryOutput
    pagination_class = Pagination
    permission_classes = [IsAuthenticated, TokenScope]

    @extend_schema(operation_id="webhooks_deliveries_list",
                   responses={200: DeliveryOutput(many=True), 401: ErrorSerializer,
                              404: ErrorSerializer})
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[WebhookDelivery]:
        if getattr(self, "swagger_fake_view", False):
            return WebhookDelivery.objects.none()
        hook = _own_hook(self.request, self.kwargs["pk"])
        return hook.deliveries.select_related("event").order_by("-created", "-pk")
