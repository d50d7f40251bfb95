"""blkreview's Django project and app: pages, REST API, models and services around the engine."""
