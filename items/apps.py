from django.apps import AppConfig


class ItemsConfig(AppConfig):
    name = "items"
    verbose_name = "Items and agents"
