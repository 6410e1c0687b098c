"""bench/seed.py's agents and their history: agents with reader profiles (seeks and offers near a corpus text's
embedding, a clause vector per want for a fifth of them), and per reader about 15 scores and 5 feed events on
items of what it seeks, 30 deliveries of recent items and 40 impression log rows (two pages), all by COPY."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta

import numpy as np

from bench.seed import Corpus, array, copy, row, vector_text

FEEDBACK, EVENTS, DELIVERIES, PAGES, PAGE = 15, 5, 30, 2, 20


def seed_agents(corpus: Corpus, count: int) -> int:
    """`count` agents with profiles; returns the id before the first one."""
    from django.db import connection

    from eigenflux.base.embedding_space import configured_embedding_model
    from items.models import Agent, ReaderProfile

    base = Agent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    rng, stamp, model = corpus.rng, corpus.now, configured_embedding_model()
    seeks, offers = rng.integers(0, len(corpus.docs), count), rng.integers(0, len(corpus.docs), count)
    seeks_vectors, offers_vectors = corpus.blend(seeks), corpus.blend(offers)
    agents, profiles = io.StringIO(), io.StringIO()
    for n in range(count):
        pk = base + n + 1
        wants, gives = corpus.docs[seeks[n]], corpus.docs[offers[n]]
        keywords = [*wants["key_terms"], *gives["key_terms"]][:5]
        agents.write(
            row([pk, f"seedbench-{pk}", f"seedbench-{pk}", f"seedbench-{pk}", "f", "t", wants["content"][:200],
                 gives["content"][:200], wants["content"][:200], array(keywords), "{}", stamp, stamp, stamp])
        )  # fmt: skip
        parts = []
        if n % 5 == 0:
            parts = [[round(x, 4) for x in part.tolist()] for part in corpus.blend(np.array([seeks[n], offers[n]]))]
        profiles.write(
            row([pk, vector_text(seeks_vectors[n]), vector_text(offers_vectors[n]), json.dumps(parts), "[]", stamp,
                 stamp, model])
        )  # fmt: skip
    with connection.cursor() as cursor:
        columns = "id, name, name_key, name_shape_key, is_official, is_active, bio, offers, seeks, "
        columns += "profile_keywords, country_codes, profile_keywords_version, created_at, updated_at"
        copy(cursor, Agent._meta.db_table, columns, agents)
        columns = "agent_id, seeks_embedding, offers_embedding, seeks_parts, offers_parts, version, updated_at, "
        copy(cursor, ReaderProfile._meta.db_table, columns + "embedding_model", profiles)
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{Agent._meta.db_table}', 'id'), {base + count})")
    corpus.seeks = seeks  # type: ignore[attr-defined]  the history's scores follow them
    return base


def seed_history(corpus: Corpus, agents: tuple[int, int], bases: np.ndarray) -> None:
    """Per reader: scores and feed events mostly on items of the corpus text it seeks, deliveries of recent items,
    and the impression log of its last two pages."""
    from django.db import connection

    from items.models import FeedDelivery, FeedEvent, FeedImpression, ItemFeedback

    first, count = agents
    rng, now, items = corpus.rng, corpus.now, len(bases)
    order = np.argsort(bases, kind="stable")
    starts = np.searchsorted(bases[order], np.arange(len(corpus.docs) + 1))
    feedback, events, deliveries, impressions = io.StringIO(), io.StringIO(), io.StringIO(), io.StringIO()
    recent = max(1, items // 20)  # the newest ids: the last weeks' items (ids follow no date; close enough)
    for n in range(count):
        agent, topic = first + n + 1, int(corpus.seeks[n])  # type: ignore[attr-defined]
        own = order[starts[topic] : starts[topic + 1]] + 1
        picks = set(rng.choice(own, min(len(own), FEEDBACK - 3), replace=False).tolist()) if len(own) else set()
        picks |= set((rng.integers(1, items + 1, 3)).tolist())
        for pk in picks:
            at = now - timedelta(hours=float(rng.random()) * 24 * 60)
            score = int(rng.choice((-1, 0, 1, 2), p=(0.15, 0.25, 0.4, 0.2)))
            feedback.write(row([agent, pk, score, f"fb-{agent}-{pk}", at, at]))
        for k, pk in enumerate(list(picks)[:EVENTS]):
            kind = ("surface", "question", "discussion", "task")[k % 4]
            events.write(
                row([agent, pk, kind, "", f"ev-{k}", "", "", now - timedelta(hours=float(rng.random()) * 240)])
            )
        served = np.unique(rng.integers(items - recent + 1, items + 1, DELIVERIES))
        for pk in served.tolist():
            deliveries.write(
                row([agent, pk, pk, f"imp_seed_{agent}", now - timedelta(hours=float(rng.random()) * 240)])
            )
        for page in range(PAGES):
            page_id, at = (
                uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | agent << 8 | page),
                now - timedelta(days=page),
            )
            shown = rng.integers(items - recent + 1, items + 1, PAGE).tolist()
            for position, pk in enumerate(shown, start=1):
                impressions.write(
                    row([page_id, agent, pk, position, round(float(rng.random()), 3), "for_me", "seed", "", at, ""])
                )
    with connection.cursor() as cursor:
        copy(
            cursor, ItemFeedback._meta.db_table, "reader_id, item_id, score, event_id, created_at, updated_at", feedback
        )
        copy(cursor, FeedEvent._meta.db_table, "agent_id, item_id, kind, impression_id, dedup_key, brief, channel, "
             "created_at", events)  # fmt: skip
        copy(
            cursor, FeedDelivery._meta.db_table, "agent_id, item_id, group_id, impression_id, delivered_at", deliveries
        )
        copy(cursor, FeedImpression._meta.db_table, "page_id, reader_id, item_id, position, score, feed, "
             "ranking_version, delivery_id, served_at, contract", impressions)  # fmt: skip
