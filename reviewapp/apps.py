from django.apps import AppConfig


class ReviewappConfig(AppConfig):
    name = "reviewapp"
    verbose_name = "blkreview"
    default_auto_field = "django.db.models.BigAutoField"
