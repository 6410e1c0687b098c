"""Pieces of the ranker tests: model documents that check (or are broken on purpose), and logged impressions."""

from __future__ import annotations

import uuid
from datetime import datetime

import numpy as np

from items.models import FeedImpression, RankerModel, RankerModelStatus
from items.ranker.contract import CONTRACT, FEATURES
from items.ranker.model import model_document


def document(weights: dict[str, float] | None = None, intercept: float = 0.0) -> dict:
    """A valid model file giving `weights` (by feature name) and 0 to every other feature."""
    vector = np.array([float((weights or {}).get(name, 0.0)) for name in FEATURES])
    return model_document(vector, intercept, inputs=[], provenance={"train": {"rows": 0}})


def stored_model(doc: dict, status: str = RankerModelStatus.ACTIVE) -> RankerModel:
    return RankerModel.objects.create(contract=doc.get("contract", ""), document=doc, status=status)


def vector(**values: float) -> list[float]:
    return [float(values.get(name.replace("=", "_"), 0.0)) for name in FEATURES]


def logged(reader_id: int, item_id: int, at: datetime, features: list[float], **fields) -> FeedImpression:
    fields.setdefault("page_id", uuid.uuid4())
    fields.setdefault("position", 1)
    return FeedImpression.objects.create(
        reader_id=reader_id,
        item_id=item_id,
        served_at=at,
        feed="for_me",
        ranking_version="test",
        contract=CONTRACT,
        features=features,
        propensity=fields.pop("propensity", 1.0),
        **fields,
    )
