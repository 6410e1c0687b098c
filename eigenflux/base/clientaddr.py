"""The client's address, for per-address limits: the socket peer, unless that peer is a trusted proxy.

X-Forwarded-For is written by whoever sends it, so it is read only when the request came from an address
in TRUSTED_PROXIES, and then from the right (the hop our own proxy appended) leftwards, skipping further
trusted proxies: the first address not in the list is the client. Everything left of it could be forged.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"TRUSTED_PROXIES: {entry!r} is not an IP address or network") from None
    return tuple(networks)


def _trusted(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(peer: str | None, forwarded_for: str | None) -> str:
    peer = (peer or "").strip() or "unknown"
    networks = _networks(tuple(settings.TRUSTED_PROXIES))
    if not forwarded_for or not networks or not _trusted(peer, networks):
        return peer
    client = peer
    for part in reversed(forwarded_for.split(",")):
        hop = _hop_address(part.strip())
        if hop is None:
            break  # garbage left of our proxies: the last trusted hop is as far as we can see
        client = hop
        if not _trusted(hop, networks):
            break
    return client


def _hop_address(hop: str) -> str | None:
    """The IP address of one X-Forwarded-For hop, or None. Some proxies (Azure's, Envoy's with a setting) write
    the client's port too, `203.0.113.5:4711` or `[2001:db8::1]:4711`: were that garbage, every client behind
    such a proxy would count as the proxy itself, and one client could spend everyone's limits."""
    address, port = hop, ""
    if hop.startswith("[") and "]" in hop:
        address, _, rest = hop[1:].partition("]")
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:] if rest else ""
    elif hop.count(":") == 1:
        address, port = hop.split(":")
        if not port:
            return None
    if port and not (port.isascii() and port.isdigit()):
        return None
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return None


def request_client_address(request) -> str:
    return client_address(request.META.get("REMOTE_ADDR"), request.META.get("HTTP_X_FORWARDED_FOR"))


def scope_client_address(scope: dict) -> str:
    """The same for an ASGI scope (WebSockets)."""
    peer = (scope.get("client") or (None,))[0]
    forwarded = None
    for name, value in scope.get("headers") or ():
        if name == b"x-forwarded-for":
            forwarded = value.decode("latin-1")
    return client_address(peer, forwarded)


def client_network(address: str | None) -> str:
    """The unit a per-client limit counts: an IPv4 address, or the /64 an IPv6 address is in (one host
    usually holds a whole /64, so counting single IPv6 addresses would give it 2**64 budgets)."""
    try:
        ip = ipaddress.ip_address((address or "").strip())
    except ValueError:
        return (address or "").strip() or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)
