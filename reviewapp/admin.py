"""Django admin for every model (issue 2 item 1)."""

from typing import Any

from django.contrib import admin

from reviewapp import models
from reviewapp.forms import LimitedAdminAuthenticationForm
from reviewapp.services.results import comparisons_delete

# the admin's login counts failures like the login page (issue 10 item 11)
admin.site.login_form = LimitedAdminAuthenticationForm


class TraceFileInline(admin.TabularInline):
    model = models.TraceFile
    extra = 0
    readonly_fields = ("name", "format", "size", "checksum", "storage_name", "created")


@admin.register(models.Patch)
class PatchAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "version", "author", "submitted_by", "created")
    search_fields = ("title", "author", "message_id")


@admin.register(models.TraceBundle)
class TraceBundleAdmin(admin.ModelAdmin):
    list_display = ("id", "role", "kernel", "size", "parse_status", "uploaded_by", "created")
    list_filter = ("role", "parse_status")
    search_fields = ("checksum", "kernel", "name")
    inlines = [TraceFileInline]


@admin.register(models.TraceFile)
class TraceFileAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "format", "size", "bundle")
    search_fields = ("name", "checksum")


@admin.register(models.Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = ("id", "patch", "status", "policy", "public", "created_by", "created")
    list_filter = ("status", "public")
    filter_horizontal = ("baseline_bundles", "patched_bundles")

    # through the service, so the comparison's chart objects leave storage with it
    def delete_model(self, request: Any, obj: Any) -> None:
        comparisons_delete(queryset=models.Comparison.objects.filter(pk=obj.pk))

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        comparisons_delete(queryset=queryset)


@admin.register(models.AnalysisJob)
class AnalysisJobAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "bundle", "state", "progress", "created", "finished")
    list_filter = ("state", "kind")
    readonly_fields = ("celery_task_id", "started", "finished")


@admin.register(models.BundleResult)
class BundleResultAdmin(admin.ModelAdmin):
    list_display = ("id", "bundle", "job", "created")


class CommentInline(admin.TabularInline):
    model = models.Comment
    extra = 0


@admin.register(models.Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "comparison", "created")
    inlines = [CommentInline]


@admin.register(models.Comment)
class CommentAdmin(admin.ModelAdmin):
    list_display = ("id", "thread", "author", "created")


@admin.register(models.ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("id", "user", "name", "prefix", "created", "last_used", "revoked")
    readonly_fields = ("key_hash", "prefix")


@admin.register(models.ComparisonResult)
class ComparisonResultAdmin(admin.ModelAdmin):
    list_display = ("id", "comparison", "state", "progress", "created", "finished")
    list_filter = ("state",)
    readonly_fields = ("celery_task_id", "started", "finished")


@admin.register(models.ComparisonChart)
class ComparisonChartAdmin(admin.ModelAdmin):
    list_display = ("id", "comparison", "section", "dev", "stage", "nbytes")
    list_filter = ("section",)
    exclude = ("payload",)
