"""Agent names: the two keys that make them unique, the official agent's reserved name, and the characters a
name may not use. The rules, with examples, are in docs/agent-names.md.

Two names are one name when either of their keys is equal (each is a unique column on Agent):
- `name_key`, the name as read: the caseless form (NFKC, case-folded, NFKC again, default-ignorable code points
  removed, whitespace collapsed), then its UTS #39 confusable skeleton, made caseless again. "EIGENFLUX",
  "EigenFlux" with a Cyrillic E (U+0415) or a Ukrainian i (U+0456), and its full-width form all read "eigenflux".
- `name_shape_key`, the name as written: the skeleton of the name as typed, then made caseless. UTS #39 maps a
  capital I to "l" (they look alike), but case folding maps it to "i" first, so "EigenFIux" (capital I) reads
  "eigenfiux" and only its shape, "eigenflux", gives it away. Neither order catches both "EIGENFLUX" (an I that
  reads as i) and "EigenFIux" (an I that looks like l); two keys do, without making every i and l one letter
  ("Ali" and "All" stay two names). What UTS #39 calls confusable is confusable here too: "Bill", "BiII" and
  "Bil1" are one name, and so are "Sam" and "Sarn" (m looks like rn).
The reserved name (OFFICIAL_AGENT_NAME) is compared more strictly (`reserved_core`): combining marks, spaces,
punctuation and symbols are removed from both keys first and Latin letter variants read as their plain letter, and
a name is reserved when the official name's core is anywhere in its own. So "Eígenflux", "EigenFlux" + U+0301,
"Eigen Flux", "Eigen-Flux", "EigenFlux!", "EigenFlʊx" (U+028A), "The EigenFlux" and "EigenFlux Team" are refused
as looking like it, while "José" and "Jose" remain two ordinary names.

A name is refused outright (`name_glyph_problem`) when it holds an invisible character (the braille blank
U+2800, Hangul fillers, zero-width spaces, bidi controls …; zero-width joiners and variation selectors only where
they do a job: after an emoji, a mark or a letter of a script that uses them), a space narrow enough to pass for
none, a combining mark with no letter under it (or more than four, or one twice, on one letter), or a word that
mixes scripts beyond UTS #39's "moderately restrictive" level: Latin with Han, Hiragana and Katakana, with Hangul
or with one other script is fine ("小明 Bot", "さくらAI"), Latin with Cyrillic or Greek in one word is not.

The skeleton and the script check are ICU's (PyICU's SpoofChecker, from the `pyicu-wheels` package, which ships
ICU and its confusables data): nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass

import icu
import regex
from django.conf import settings

from items.text import text_problem

NAME_MAX_LENGTH = 100
# A key can be longer than the name (NFKC and the skeleton expand some characters); it is capped so that the
# unique index entry stays well inside PostgreSQL's B-tree row limit.
NAME_KEY_MAX_LENGTH = 400
MAX_MARKS_PER_LETTER = 4

_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}")
_SPACE = regex.compile(r"\s+")
_CONTROL = regex.compile(r"\p{Cc}")
# Default-ignorable characters that have a job in some names: joiners (emoji sequences, Persian, Indic scripts)
# and variation selectors (emoji presentation, CJK and Mongolian variants). The keys drop them all the same.
_JOINERS_AND_SELECTORS = regex.compile(r"[\u200c\u200d\u180b-\u180d\u180f\ufe00-\ufe0f\U000e0100-\U000e01ef]")
# Where such a character does its job: after an emoji or symbol, a digit (keycaps), a mark (a virama, another
# selector) or a letter of a script that uses joiners. Between Latin, Greek or Cyrillic letters it only hides.
_JOB_BEFORE = regex.compile(
    r"[\p{Extended_Pictographic}\p{S}\p{N}\p{M}#*[\p{L}--[\p{Latin}\p{Greek}\p{Cyrillic}]]]", regex.V1
)
# Characters that draw nothing. The braille blank is not default-ignorable, so the keys keep it and it would make
# a look-alike; the Hangul fillers are, and are listed so they stay refused whatever regex's tables say.
_BLANK = frozenset("\u2800\u115f\u1160\u3164\uffa0")
# Thin, hair and similar narrow spaces, which can read as no space at all (an ordinary or full-width space is
# kept and compared).
_NARROW_SPACES = frozenset("\u2006\u2008\u2009\u200a\u202f\u205f")
_LETTER_OR_DIGIT = regex.compile(r"[\p{L}\p{N}]")
_MARK = regex.compile(r"\p{M}")
_MARK_OR_SPACE = regex.compile(r"[\p{M}\s]+")
# A Latin letter with a hook, tail or stroke, or a small capital, reads as its plain letter; a few letters named
# otherwise read as the plain letter they pass for.
_LATIN_VARIANT = regex.compile(r"LATIN (?:SMALL |CAPITAL )?LETTER (?:SMALL CAPITAL )?(.+?)(?: WITH .+)?")
_PASSES_FOR = {"UPSILON": "u", "IOTA": "i", "DOTLESS I": "i", "DOTLESS J": "j", "SCRIPT G": "g", "OPEN O": "o"}
# The reserved name is refused inside longer names only when its core has at least this many characters.
RESERVED_CONTAINED_MIN_LENGTH = 5


@dataclass(frozen=True)
class NameKeys:
    """The two forms a name is compared in (see the module docstring); both are unique among agents."""

    read: str
    shape: str


def caseless(name: str) -> str:
    """Unicode's caseless form with default-ignorables removed and whitespace collapsed (no look-alike folding:
    this was the whole key before migration 0017, whose reversal restores it). Pure."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return _SPACE.sub(" ", _IGNORABLE.sub("", folded)).strip()


@functools.cache
def _spoof_checker() -> icu.SpoofChecker:
    # ICU documents check and getSkeleton on one configured checker as safe from many threads at once.
    checker = icu.SpoofChecker()
    checker.setChecks(icu.USpoofChecks.RESTRICTION_LEVEL)
    checker.setRestrictionLevel(icu.URestrictionLevel.MODERATELY_RESTRICTIVE)
    return checker


def skeleton(text: str) -> str:
    """UTS #39's skeleton: NFD, each character replaced by its prototype in confusables.txt, NFD again."""
    return str(_spoof_checker().getSkeleton(0, text))


def name_key(name: str) -> str:
    """The name as read: the skeleton of its caseless form, made caseless again. Pure."""
    return caseless(skeleton(caseless(name)))


def name_shape_key(name: str) -> str:
    """The name as written: the skeleton of the name as typed (so a capital I is an l), made caseless. Pure."""
    return caseless(skeleton(name))


def name_keys(name: str) -> NameKeys:
    return NameKeys(read=name_key(name), shape=name_shape_key(name))


def _bare(key: str) -> str:
    """A key without combining marks or spaces: what the reserved name is compared in."""
    return unicodedata.normalize("NFC", _MARK_OR_SPACE.sub("", unicodedata.normalize("NFD", key)))


def _read_as_latin(ch: str) -> str:
    """The plain Latin letter a Latin letter variant reads as beside plain letters (UTS #39 leaves them apart),
    or `ch` itself."""
    match = _LATIN_VARIANT.fullmatch(unicodedata.name(ch, ""))
    if match is None:
        return ch
    letter = match.group(1)
    return letter.lower() if len(letter) == 1 else _PASSES_FOR.get(letter, ch)


def reserved_core(key: str) -> str:
    """A key as the reserved name is compared in: without combining marks, spaces, punctuation or symbols, and
    Latin letter variants read as their plain letter ("Eigen-Flux", "EigenFlux!", "EigenFlʊx" read "eigenflux")."""
    return "".join(_read_as_latin(ch) for ch in _bare(key) if _LETTER_OR_DIGIT.match(ch))


def looks_reserved(keys: NameKeys) -> bool:
    """Whether a name with these keys looks like the official agent's name (OFFICIAL_AGENT_NAME): its core is in
    the name's core, whatever surrounds it ("The EigenFlux", "EigenFlux Team", "Official EigenFlux"). A core
    shorter than RESERVED_CONTAINED_MIN_LENGTH must be the whole name's, or it would refuse too many names."""
    official = name_keys(settings.OFFICIAL_AGENT_NAME)
    cores = {reserved_core(keys.read), reserved_core(keys.shape)}
    reserved = {reserved_core(official.read), reserved_core(official.shape)} - {""}
    if cores & reserved:
        return True
    long_enough = [core for core in reserved if len(core) >= RESERVED_CONTAINED_MIN_LENGTH]
    return any(core in name for core in long_enough for name in cores)


def is_official_name(name: str) -> bool:
    """Whether `name` is the official agent's name itself, in another case, width or with ignorable characters."""
    return caseless(name) == caseless(settings.OFFICIAL_AGENT_NAME)


def name_problem(name: str) -> str | None:
    """Why `name` cannot be stored or compared at all (whoever holds it), or None."""
    problem = text_problem(name)
    if problem:
        return f"name {problem}"
    if _CONTROL.search(name):
        return "name must not contain control characters"
    if len(name) > NAME_MAX_LENGTH:
        return f"name is {len(name)} characters; the limit is {NAME_MAX_LENGTH}"
    keys = name_keys(name)
    if not keys.read or not keys.shape:
        return "name must contain visible characters"
    longest = max(len(keys.read), len(keys.shape))
    if longest > NAME_KEY_MAX_LENGTH:
        return f"name is too long once normalised ({longest} characters; the limit is {NAME_KEY_MAX_LENGTH})"
    return None


def name_glyph_problem(name: str) -> str | None:
    """Why `name` is refused for the characters it uses (invisible ones, stray combining marks, a word mixing
    scripts), or None. Checked after name_problem, on names that can be stored."""
    return invisible_problem(name) or _marks_problem(name) or _script_problem(name)


def _described(ch: str) -> str:
    return f"U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')})"


def invisible_problem(name: str) -> str | None:
    """The first invisible character that does no job in `name`, described, or None."""
    for index, ch in enumerate(name):
        if ch in _NARROW_SPACES:
            return f"name contains a narrow space {_described(ch)} that can pass for none; use an ordinary space"
        if _hides(name, index):
            return f"name contains an invisible character {_described(ch)}"
    return None


def without_invisible(name: str) -> str:
    """`name` without the invisible characters invisible_problem refuses, narrow spaces made ordinary ones (how
    migration 0017 cleans names stored before they were refused)."""
    return "".join(" " if ch in _NARROW_SPACES else ch for i, ch in enumerate(name) if not _hides(name, i))


def _hides(name: str, index: int) -> bool:
    ch = name[index]
    if _JOINERS_AND_SELECTORS.match(ch):
        return index == 0 or not _JOB_BEFORE.match(name[index - 1])
    return ch in _BLANK or bool(_IGNORABLE.match(ch))


def _marks_problem(name: str) -> str | None:
    """Combining marks must sit on a letter or digit (enclosing ones, as a keycap's, on any visible character),
    at most MAX_MARKS_PER_LETTER of them and no one mark twice. Default-ignorable marks (variation selectors) are
    invisible_problem's."""
    base, marks = "", []
    for ch in unicodedata.normalize("NFD", name) + " ":
        if _MARK.match(ch) and not _IGNORABLE.match(ch):
            if not base or (unicodedata.category(ch) != "Me" and not _LETTER_OR_DIGIT.match(base)):
                return f"name contains a combining mark {_described(ch)} that is not on a letter"
            marks.append(ch)
            continue
        if len(marks) > MAX_MARKS_PER_LETTER:
            return f"name stacks {len(marks)} combining marks on one letter; the limit is {MAX_MARKS_PER_LETTER}"
        if len(set(marks)) < len(marks):
            repeated = next(mark for mark in marks if marks.count(mark) > 1)
            return f"name puts the combining mark {_described(repeated)} twice on one letter"
        if not _IGNORABLE.match(ch):
            base, marks = ("" if ch.isspace() else ch), []
    return None


def _script_problem(name: str) -> str | None:
    """A word (between spaces) mixing scripts beyond UTS #39's moderately restrictive level, or None."""
    checker = _spoof_checker()
    for word in name.split():
        if checker.check(word) & icu.USpoofChecks.RESTRICTION_LEVEL:
            scripts = sorted({_script(ch) for ch in word} - {"Common", "Inherited"})
            return f"name mixes {' and '.join(scripts)} letters in the word {word!r}, as look-alike names do"
    return None


def _script(ch: str) -> str:
    return str(icu.Script.getScript(ord(ch)).getName())
