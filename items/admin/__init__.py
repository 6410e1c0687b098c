"""The moderator's admin for the items domain (docs/admin.md): items with their outcome and overrides, the keyword
blacklist, agents and their tokens. Importing the package registers every ModelAdmin; the action helpers other
apps' admins share are in items.admin.actions."""

from items.admin import agents, blacklist, items, milestones, ranker  # noqa: F401 - registers the ModelAdmins
from items.admin.actions import badge, report
from items.admin.items import ITEM_DETAIL_PANELS

__all__ = ["ITEM_DETAIL_PANELS", "badge", "report"]
