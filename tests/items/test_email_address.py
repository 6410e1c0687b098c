"""The canonical e-mail form: look-alike letters either fold to the very address they imitate (and then reach
only its owner) or make a different address, or are refused with the reason; never an UPPER()-style match."""

from __future__ import annotations

import pytest

from eigenflux.base.clientaddr import client_network
from items.email_address import EmailAddressInvalid, email_canonical

DOTLESS_I = "\u0131"
KELVIN = "\u212a"
CYRILLIC_A = "\u0430"
FULLWIDTH = str.maketrans({chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)})


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [
        ("alice@gmail.com", "alice@gmail.com"),
        ("  Alice@GMAIL.Com ", "alice@gmail.com"),  # case and surrounding space
        ("alice@gmail.com".translate(FULLWIDTH), "alice@gmail.com"),  # an IME's full-width mode, @ and . too
        (f"{KELVIN}ate@example.com", "kate@example.com"),  # the Kelvin sign is a K
        (f"kate@{KELVIN}eep.com", "kate@keep.com"),
        # Different domains under IDNA, so different addresses: never gmail.com.
        (f"alice@gma{DOTLESS_I}l.com", "alice@xn--gmal-nza.com"),
        ("bob@\u0441\u043e\u0440\u0435.com", "bob@xn--e1argc.com"),  # "cope" in Cyrillic letters only
        ("x@fa\u00df.de", "x@xn--fa-hia.de"),  # IDNA 2008 keeps the sharp s (IDNA 2003 made it "fass.de")
    ],
)
def test_the_canonical_form(typed, canonical):
    assert email_canonical(typed) == canonical
    assert email_canonical(canonical) == canonical  # canonical forms are fixed points


@pytest.mark.parametrize(
    ("typed", "reason"),
    [
        (
            f"al{DOTLESS_I}ce@gmail.com",
            f"Internationalized characters before the @-sign are not supported: '{DOTLESS_I}'",
        ),
        (f"{CYRILLIC_A}lice@gmail.com", "Internationalized characters before the @-sign"),
        (f"alice@gm{CYRILLIC_A}il.com", "mixes Latin and Cyrillic letters"),
        ("alice@xn--gmil-63d.com", "mixes Latin and Cyrillic letters"),  # the same look-alike, sent as Punycode
        ("not-an-address", "must have an @-sign"),
        ("Alice <alice@gmail.com>", "display name"),
        ('"alice"@gmail.com', "Quoting the part before the @-sign"),
        ("alice@[127.0.0.1]", "bracketed IP address"),
        ("alice@host.local", "special-use or reserved name"),
        ("a\u200b@gmail.com", "ZERO WIDTH SPACE"),
        ("", "an address is required"),
        (None, "an address is required"),
    ],
)
def test_what_is_refused_says_why(typed, reason):
    with pytest.raises(EmailAddressInvalid) as refused:
        email_canonical(typed)
    assert str(refused.value).startswith("invalid email format: ") and reason in str(refused.value)


def test_a_client_is_an_ipv4_address_or_an_ipv6_64():
    assert client_network("192.0.2.7") == "192.0.2.7"
    assert client_network("2001:db8:1:2:aaaa::1") == client_network("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
    assert client_network("2001:db8:1:3::1") != client_network("2001:db8:1:2::1")
    assert client_network("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_network(None) == "unknown"
