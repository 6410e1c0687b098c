from django.apps import AppConfig


class ItemsConfig(AppConfig):
    name = "items"
    verbose_name = "Items and agents"

    def ready(self) -> None:
        from eigenflux.base import checks  # noqa: F401  (registers the connection budget check)
