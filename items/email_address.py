"""The canonical form of an e-mail address: the one form that is stored, compared, rate-limited and mailed.

Two addresses are one when their canonical forms are equal (docs/login.md#canonical-e-mail-addresses):
- the whole address is NFKC-normalised first, so full-width letters (an IME's full-width mode), the Kelvin
  sign U+212A and other compatibility characters become the ASCII they stand for;
- the local part must then be ASCII and is lowercased. No SMTPUTF8: Django's SMTP backend cannot deliver to
  such mailboxes, so a dotless i (U+0131) or a Cyrillic a (U+0430) before the @ is refused, never folded;
- the domain goes through IDNA (UTS-46 mapping, IDNA 2008 rules) to its ASCII A-label form, lowercase. A dotless
  i or a Cyrillic letter in the domain makes a different domain (gma<U+0131>l.com is xn--gmal-nza.com), never
  gmail.com; a domain label mixing Latin, Greek or Cyrillic letters is refused as a look-alike.
Comparison is by equality of this form, never by SQL UPPER/LOWER (UPPER of U+0131 is "I").
"""

from __future__ import annotations

import unicodedata

import idna
import regex
from email_validator import EmailNotValidError, validate_email

EMAIL_MAX_LENGTH = 254
# The scripts whose letters pass for one another (UTS #39's classic homograph trio); one label may use one.
_CONFUSABLE_SCRIPTS = {name: regex.compile(rf"\p{{{name}}}") for name in ("Latin", "Greek", "Cyrillic")}


class EmailAddressInvalid(ValueError):
    """The text is not an address this server accepts; the message says why (for the caller, not a log)."""


def email_canonical(raw: object) -> str:
    """The canonical form of `raw` (see the module docstring), or EmailAddressInvalid naming the problem. Pure."""
    if not isinstance(raw, str) or not raw.strip():
        raise EmailAddressInvalid("invalid email format: an address is required")
    text = unicodedata.normalize("NFKC", raw.strip())
    try:
        valid = validate_email(
            text,
            allow_smtputf8=False,
            allow_quoted_local=False,
            allow_domain_literal=False,
            allow_display_name=False,
            check_deliverability=False,
        )
    except EmailNotValidError as exc:
        raise EmailAddressInvalid(f"invalid email format: {exc}") from None
    _refuse_mixed_scripts(valid.ascii_domain)
    if valid.ascii_local_part is None:  # cannot happen with allow_smtputf8=False; said, not assumed
        raise EmailAddressInvalid("invalid email format: the part before @ must be ASCII")
    canonical = f"{valid.ascii_local_part.lower()}@{valid.ascii_domain.lower()}"
    if len(canonical) > EMAIL_MAX_LENGTH:
        raise EmailAddressInvalid(f"invalid email format: longer than {EMAIL_MAX_LENGTH} characters")
    return canonical


def _refuse_mixed_scripts(ascii_domain: str) -> None:
    for label in ascii_domain.split("."):
        if not label.startswith("xn--"):
            continue
        unicode_label = idna.decode(label)
        scripts = [name for name, pattern in _CONFUSABLE_SCRIPTS.items() if pattern.search(unicode_label)]
        if len(scripts) > 1:
            raise EmailAddressInvalid(
                f"invalid email format: the domain label {unicode_label!r} mixes {' and '.join(scripts)} letters "
                "(a look-alike of another domain)"
            )
