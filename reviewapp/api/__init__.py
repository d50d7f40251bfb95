"""REST API under /api/v1/ (DRF, URL-path versioning, OpenAPI at /api/v1/schema/)."""
