"""English glosses of Chinese and Japanese words, from two independent bilingual dictionaries.

The local embedding (all-MiniLM-L6-v2) reads English only. To let 线性代数, 線形代数 and "linear algebra"
meet, a CJK text is also read through its English glosses: each CJK run is cut by longest dictionary match
and every word found is replaced by its first short English gloss ("二手显卡出售" -> "second-hand video card
sell"); the embedding blends the model's vector of that gloss text into the text's vector
(pipeline.llm.local.embedding).

The dictionaries ship in the `edictreader` package (installed --no-deps: only its data files are used):

- CC-CEDICT (cedict_ts.u8; CC BY-SA 4.0, MDBG): Chinese -> English, traditional and simplified headwords.
- EDICT2 (edict2, EUC-JP; CC BY-SA 4.0, the Electronic Dictionary Research and Development Group's JMdict
  in the EDICT2 format): Japanese -> English, kanji and kana headwords; entries marked (P) (common) win.

Neither was written for this project nor tuned on its corpus. Text with kana is read with the Japanese
dictionary first, other Han text with the Chinese one first; the other dictionary fills words the first
lacks. Words of hiragana alone (particles, inflections) and single characters are not glossed: they carry
grammar more often than topic.

Both files are parsed once per process on first use (2-3 s), kept as two plain dicts (about 90 MB resident), and
read under no lock (dict reads are thread-safe; the first load is behind one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import regex

from eigenflux.base.longlived import loaded_once

MAX_WORD = 8  # longest headword tried at each position (characters)
GLOSSES_PER_WORD = 2
DICTIONARY_FILES = ("cedict_ts.u8", "edict2")
_CJK_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}ー々〆ヶ]+")
_KANA = regex.compile(r"[\p{Hiragana}\p{Katakana}]")
_HIRAGANA_ONLY = regex.compile(r"^[\p{Hiragana}ー]+$")
_TOKEN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}ー々〆ヶ]+|[\p{Latin}\p{N}][\p{Latin}\p{N}.+#-]*")
_PAREN = re.compile(r"\([^)]*\)|\{[^}]*\}|\[[^\]]*\]")
# CC-CEDICT glosses that name no meaning of their own.
_CEDICT_SKIP = ("surname ", "variant of", "old variant", "see ", "used in ", "abbr. for", "erhua variant")


class GlossaryMissing(RuntimeError):
    """The dictionary package (edictreader) is not installed."""


@dataclass(frozen=True)
class Glossary:
    chinese: dict[str, str]
    japanese: dict[str, str]


def database() -> Path:
    """The folder holding both dictionary files (found, not read: the start-up check calls this)."""
    try:
        import edictreader
    except ImportError as error:
        raise GlossaryMissing(
            "the CJK glossary needs the edictreader package (make install: requirements-models.txt, --no-deps)"
        ) from error
    folder = Path(edictreader.__file__).resolve().parent / "database"
    for name in DICTIONARY_FILES:
        if not (folder / name).is_file():
            raise GlossaryMissing(f"{folder / name} is missing from the edictreader package")
    return folder


def _clean(gloss: str) -> str:
    text = _PAREN.sub(" ", gloss)
    text = text.split(";")[0].split(",")[0]
    return " ".join(text.split())


def _keep(word: str) -> bool:
    """A headword the cut can use: two to MAX_WORD characters, not hiragana alone (never glossed)."""
    return 2 <= len(word) <= MAX_WORD and not _HIRAGANA_ONLY.match(word)


def _join(known: str | None, meanings: list[str]) -> str:
    """At most GLOSSES_PER_WORD distinct glosses: a word's first two meanings, or one from each of two
    entries (台风: "stage presence" and "typhoon" are two entries with the same simplified form)."""
    chosen = known.split(" / ") if known else []
    for meaning in meanings:
        if len(chosen) >= GLOSSES_PER_WORD:
            break
        if meaning not in chosen:
            chosen.append(meaning)
    return " / ".join(chosen)


def parse_cedict(text: str) -> dict[str, str]:
    """Headword (simplified and traditional) -> first gloss of its first entry that has a meaning of its own
    (an entry for the common word before one for a surname or a proper name)."""
    glosses: dict[str, str] = {}
    proper: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("#") or "/" not in line:
            continue
        head, _, rest = line.partition("/")
        parts = head.split(" ", 2)
        if len(parts) < 3:
            continue
        traditional, simplified, pinyin = parts
        meanings = [_clean(g) for g in rest.split("/") if g and "CL:" not in g]
        meanings = [m for m in meanings if m and not m.lower().startswith(_CEDICT_SKIP)]
        if not meanings:
            continue
        target = proper if pinyin[1:2].isupper() else glosses
        for word in (simplified, traditional):
            if _keep(word):
                target[word] = _join(target.get(word), meanings)
    return proper | glosses


def parse_edict2(text: str) -> dict[str, str]:
    """Headword (kanji and kana spellings) -> first gloss of its first sense; an entry marked common (P)
    wins over an uncommon one with the same spelling."""
    glosses: dict[str, str] = {}
    common: set[str] = set()
    for line in text.splitlines()[1:]:
        head, _, rest = line.partition(" /")
        if not rest:
            continue
        first_sense = rest.split("/(2)")[0].split("/")
        meanings = [_clean(s) for s in first_sense if s and not s.startswith("EntL")]
        meanings = [m for m in meanings if m]
        if not meanings:
            continue
        gloss = _join(None, meanings)
        is_common = "(P)" in rest
        spellings = head.split(" [")[0].split(";")
        if "[" in head:
            spellings += head.split(" [", 1)[1].rstrip("]").split(";")
        for spelling in spellings:
            word = _PAREN.sub("", spelling).strip()
            if not _keep(word) or (word in glosses and (word in common or not is_common)):
                continue
            glosses[word] = gloss
            if is_common:
                common.add(word)
    return glosses


@loaded_once("loading the CJK glossary")
def glossary() -> Glossary:
    """Both dictionaries, parsed on the first call in this process."""
    folder = database()
    chinese = parse_cedict((folder / "cedict_ts.u8").read_text(encoding="utf-8"))
    japanese = parse_edict2((folder / "edict2").read_bytes().decode("euc_jp", errors="replace"))
    return Glossary(chinese=chinese, japanese=japanese)


def _words(run: str, first: dict[str, str], second: dict[str, str]) -> list[str]:
    """Longest-match cut of one CJK run into dictionary words; the glosses of those worth glossing."""
    found: list[str] = []
    index = 0
    while index < len(run):
        for size in range(min(MAX_WORD, len(run) - index), 1, -1):
            word = run[index : index + size]
            gloss = first.get(word) or second.get(word)
            if gloss:
                found.append(gloss.replace(" / ", " "))
                index += size
                break
        else:
            index += 1
    return found


def gloss_text(text: str) -> str:
    """The text with its CJK words replaced by English glosses and its Latin words and numbers kept, in
    order; "" when it has no CJK word the dictionaries know."""
    if not _CJK_RUN.search(text):
        return ""
    book = glossary()
    first, second = (book.japanese, book.chinese) if _KANA.search(text) else (book.chinese, book.japanese)
    parts: list[str] = []
    glossed = False
    for token in _TOKEN.findall(text):
        if _CJK_RUN.fullmatch(token):
            words = _words(token, first, second)
            glossed = glossed or bool(words)
            parts.extend(words)
        else:
            parts.append(token)
    return " ".join(parts) if glossed else ""
