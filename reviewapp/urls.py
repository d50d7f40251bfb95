"""Pages, auth, admin and the API (/api/v1/...)."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from reviewapp.metrics import metrics_view
from reviewapp.views import auth, comparisons, pages, series, sharing, threads, tokens

urlpatterns = [
    path("", pages.home, name="home"),
    path("healthz", pages.healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("upload/", comparisons.upload, name="upload"),
    path("upload/preset-diff.json", comparisons.preset_diff, name="upload-preset-diff"),
    path("upload/fixes.json", comparisons.upload_fixes, name="upload-fixes"),
    path("comparisons/<int:pk>/", comparisons.detail, name="comparison-detail"),
    path("comparisons/<int:pk>/progress.json", comparisons.progress, name="comparison-progress"),
    path("comparisons/<int:pk>/sections/<slug:section>.json", comparisons.section,
         name="comparison-section"),
    path("comparisons/<int:pk>/report.txt", comparisons.report, name="comparison-report"),
    path("comparisons/<int:pk>/comments/", comparisons.comment, name="comparison-comment"),
    path("comparisons/<int:pk>/runs/", comparisons.add_runs, name="comparison-add-runs"),
    path("comparisons/<int:pk>/rules/", comparisons.rules, name="comparison-rules"),
    path("comparisons/<int:pk>/sharing/", sharing.comparison_sharing, name="comparison-sharing"),
    path("series/", series.series_list, name="series-list"),
    path("series/new/", series.series_upload, name="series-upload"),
    path("series/<int:pk>/", series.series_detail, name="series-detail"),
    path("series/<int:pk>/relink/", series.series_relink_view, name="series-relink"),
    path("series/<int:pk>/verdicts/", series.series_verdict, name="series-verdict"),
    path("series/<int:pk>/sharing/", sharing.series_sharing, name="series-sharing"),
    path("series/<int:pk>/trailers.txt", series.series_trailers, name="series-trailers"),
    path("patches/<int:pk>/", series.patch_detail, name="patch-detail"),
    path("patches/<int:pk>/verdicts/", series.patch_verdict, name="patch-verdict"),
    path("patches/<int:pk>/state/", series.patch_state, name="patch-state"),
    path("patches/<int:pk>/trailers.txt", series.patch_trailers, name="patch-trailers"),
    path("comparisons/<int:pk>/threads/", threads.comparison_thread_create,
         name="comparison-thread-create"),
    path("patches/<int:pk>/threads/", threads.patch_thread_create, name="patch-thread-create"),
    path("threads/<int:pk>/", threads.thread_detail, name="thread-detail"),
    path("threads/<int:pk>/reply/", threads.thread_reply, name="thread-reply"),
    path("threads/<int:pk>/resolve/", threads.thread_resolve, name="thread-resolve"),
    path("comments/<int:pk>/edit/", threads.comment_edit_view, name="comment-edit"),
    path("comments/<int:pk>/delete/", threads.comment_delete_view, name="comment-delete"),
    path("comments/<int:pk>/history/", threads.comment_history, name="comment-history"),
    path("notifications/", threads.notification_settings, name="notification-settings"),
    path("patches/<int:pk>/sharing/", sharing.patch_sharing, name="patch-sharing"),
    path("tokens/", tokens.token_list, name="token-list"),
    path("tokens/<int:pk>/revoke/", tokens.token_revoke_view, name="token-revoke"),
    path("accounts/login/", auth.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    re_path(r"^api/(?P<version>v1)/", include("reviewapp.api.urls")),
]

# An unreachable database answers 503 (JSON under /api/), any other crash a short 500; the
# exception is logged only (reviewapp/views/errors.py).
handler500 = "reviewapp.views.errors.server_error"
