"""API routes, mounted at /api/<version>/ (URLPathVersioning; v1 is the only version)."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from reviewapp.api import (  # noqa: F401  (schema registers extensions)
    bundles,
    comparisons,
    jobs,
    schema,
    sharing,
)

urlpatterns = [
    path("bundles/", bundles.BundleCreateApi.as_view(), name="api-bundle-create"),
    path("bundles/<int:pk>/", bundles.BundleDetailApi.as_view(), name="api-bundle-detail"),
    path("bundles/<int:pk>/results/", bundles.BundleResultsApi.as_view(),
         name="api-bundle-results"),
    path("comparisons/", comparisons.ComparisonListCreateApi.as_view(),
         name="api-comparison-list"),
    path("comparisons/<int:pk>/", comparisons.ComparisonDetailApi.as_view(),
         name="api-comparison-detail"),
    path("comparisons/<int:pk>/results/", comparisons.ComparisonResultsApi.as_view(),
         name="api-comparison-results"),
    path("comparisons/<int:pk>/check/", comparisons.ComparisonCheckApi.as_view(),
         name="api-comparison-check"),
    path("comparisons/<int:pk>/thresholds/", comparisons.ComparisonThresholdsApi.as_view(),
         name="api-comparison-thresholds"),
    path("comparisons/<int:pk>/analysis/", comparisons.ComparisonAnalysisApi.as_view(),
         name="api-comparison-analysis"),
    path("comparisons/<int:pk>/bundles/", comparisons.ComparisonAddBundlesApi.as_view(),
         name="api-comparison-add-bundles"),
    path("comparisons/<int:pk>/access/", sharing.ComparisonAccessApi.as_view(),
         name="api-comparison-access"),
    path("submissions/", comparisons.SubmissionCreateApi.as_view(), name="api-submission-create"),
    path("jobs/<int:pk>/", jobs.JobDetailApi.as_view(), name="api-job-detail"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
]
