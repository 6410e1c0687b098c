"""Keywords for text without spaces between words, from real segmenters rather than character pairs.

- Chinese: jieba's TF-IDF keyword extraction (its own dictionary and IDF table, shipped in the package).
- Japanese: Janome's morphological analysis (IPADIC, shipped in the package); runs of nouns, with their
  prefixes and suffixes, become compound terms (機械 + 学習 + エンジニア -> 機械学習エンジニア), ranked by
  frequency, then by first appearance.
- Korean (spaced): the words between spaces.

Both segmenters load their dictionaries on first use (jieba about a second, cached under the temp dir after
the first run; Janome a fraction of one) and are used behind a lock: neither documents thread safety, and
the work is CPU-bound under the GIL anyway.
"""

from __future__ import annotations

import threading
from collections import Counter
from types import ModuleType

import regex

from eigenflux.base.longlived import freeze, loaded_once
from items.textsearch import jieba_loaded

_LOCK = threading.Lock()
_DIGITS_ONLY = regex.compile(r"^[\p{N}\p{P}\s]+$")
# Nouns that carry no topic (Japanese "thing", "time", "together", formal nouns ...).
_JA_GENERIC = frozenset(
    {"こと", "もの", "ため", "よう", "とき", "ところ", "一緒", "場合", "方", "者", "今回", "以上", "程度"}
    | {"可能", "対応", "来週", "今週", "来月", "今月", "明日", "今日", "昨年", "今年", "先週", "最新", "大規模"}
    # Who posts and what kind of post it is, not what it is about: 弊社 "our company", 募集 "recruiting".
    | {"弊社", "当社", "募集", "代行", "リリース", "発生", "中心", "経験", "チーム", "年以上", "詳細", "連絡"}
    # What the post says it does, not its topic: 注意 "warning", 開催 "holding", 判明 "turned out", 無料 "free".
    | {"注意", "開催", "判明", "無料", "テーマ", "募集中", "参加者募集中", "お願い", "予算", "紹介", "共有"}
)
_ZH_GENERIC = frozenset(
    {"我们", "你们", "可以", "一个", "需要", "进行", "提供", "以及", "如果", "请", "已经", "目前", "可议", "适合"}
    | {"优先", "两周", "下周", "本周", "明天", "今天", "今年", "去年", "尽快", "最新", "对方", "请勿"}
    # Who posts and what kind of post it is, or its terms, not what it is about: 招聘 "hiring", 可谈 "negotiable".
    | {"招聘", "承接", "用过", "上门", "包含", "月薪", "工期", "交付", "可谈", "面议", "团队", "经验", "多年"}
    | {"热爱", "详情", "私信", "联系", "欢迎", "咨询", "有人", "帮忙", "一下", "主要", "支持"}
    # Asking and offering words, amounts and verbs of the post itself: 求助 "help wanted", 有没有 "is there".
    | {"求助", "有没有", "怎么", "知道", "寻找", "预算", "万元", "元起", "每条", "服务", "提升", "发布", "熟悉"}
)
_ja_tokenizer = None


def chinese_keywords(text: str, limit: int) -> list[str]:
    with _LOCK:
        terms = _jieba_analyse().extract_tags(text, topK=limit * 3)
    return [term for term in terms if _keep(term) and term not in _ZH_GENERIC][: limit * 2]


@loaded_once("loading jieba's IDF table")
def _jieba_analyse() -> ModuleType:
    """jieba's keyword extraction with its dictionary and IDF table loaded, kept out of the collector's way."""
    jieba_loaded()
    import jieba.analyse  # loads the IDF table

    analyse: ModuleType = jieba.analyse
    return analyse


def japanese_keywords(text: str, limit: int) -> list[str]:
    global _ja_tokenizer
    with _LOCK:
        if _ja_tokenizer is None:
            from janome.tokenizer import Tokenizer

            _ja_tokenizer = Tokenizer()
            freeze("loading Janome's dictionary")
        # Without wakati mode Janome yields Token objects only (its signature also allows plain strings).
        parsed = [token for token in _ja_tokenizer.tokenize(text) if not isinstance(token, str)]
        tokens = [(token.surface, token.part_of_speech.split(",")) for token in parsed]
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    compound: list[str] = []

    def close() -> None:
        term = "".join(compound)
        compound.clear()
        if _keep(term) and term not in _JA_GENERIC:
            counts[term] += 1
            first.setdefault(term, len(first))

    for surface, pos in tokens:
        is_noun = pos[0] == "名詞" and pos[1] not in ("非自立", "代名詞")
        if is_noun or (pos[0] == "接頭詞" and pos[1] == "名詞接続"):
            compound.append(surface)
        else:
            close()
    close()
    return sorted(counts, key=lambda term: (-counts[term], first[term]))[: limit * 2]


def korean_keywords(text: str, limit: int) -> list[str]:
    words = [word for word in regex.findall(r"[\p{Hangul}\p{L}\p{N}]+", text) if _keep(word)]
    counts = Counter(words)
    return sorted(counts, key=lambda word: (-counts[word], words.index(word)))[: limit * 2]


def _keep(term: str) -> bool:
    return len(term) >= 2 and not _DIGITS_ONLY.match(term)
