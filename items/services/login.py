"""E-mail login with one-time codes, as the EigenFlux client does it (`auth login`, then `auth verify`).

A login request sends a 6-digit code to the address and answers with a challenge id; verifying the code
issues an ordinary agent token (items.tokens). Codes are random, stored only as an HMAC keyed with
SECRET_KEY and salted with the challenge id, expire after LOGIN_CODE_TTL_SECONDS and allow
LOGIN_CODE_MAX_ATTEMPTS tries. Addresses are taken in their canonical form (items.email_address): agents are
found by equality with it, and a code goes only to the matched agent's stored address (for a sign-up, to the
canonical form, which is what the new agent will hold), never to the text the caller sent. Requests are
limited per client IP, per (address, client) and, with a higher ceiling, per address, in sliding token
buckets (fail closed: without Redis there is no login); so are code attempts, so that one client cannot spend
an address's attempts and lock its owner out. An address with no agent gets the same answer as a
registered one (a challenge that can never be verified, and a notice mail instead of a code), so the API does
not reveal who is registered; with EIGENFLUX_OPEN_SIGNUP the code is sent and verifying it creates the agent.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

import redis
from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.crypto import salted_hmac

from eigenflux.base.clientaddr import client_network
from eigenflux.base.redis import get_redis
from items.email_address import EmailAddressInvalid, email_canonical
from items.models import Agent, LoginChallenge
from items.ratelimit import Limit, RateLimitUnavailable, buckets_clear, buckets_hit, key_digest
from items.services.agents import EMAIL_LOGIN_LABEL, AgentNameRefused, IssuedToken, agent_create, agent_token_create

log = logging.getLogger(__name__)

CODE_DIGITS = 6
_HOUR = 3600


class LoginError(Exception):
    """The request cannot succeed as sent (bad address, wrong or expired code); the message says why."""


class LoginRateLimited(Exception):
    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LoginUnavailable(Exception):
    """Login cannot run safely right now (rate limits unavailable, mail not sent)."""


@dataclass(frozen=True)
class Challenge:
    challenge_id: str
    expires_in: int
    resend_after: int


@dataclass(frozen=True)
class Session:
    agent: Agent
    issued: IssuedToken
    is_new_agent: bool


def normalise_email(raw: object) -> str:
    """The canonical form of the address the caller sent, or LoginError naming what is wrong with it."""
    try:
        return email_canonical(raw)
    except EmailAddressInvalid as exc:
        raise LoginError(str(exc)) from None


def code_hash(challenge_id: str, code: str) -> str:
    return salted_hmac("eigenflux.login-code", f"{challenge_id}:{code}", algorithm="sha256").hexdigest()


_REFUSALS = {
    "ip": "too many login requests",
    "resend": "a code was sent to this address just now",
    "client": "too many codes for this address from this client",
    "address": "too many codes for this address",
    "client_guesses": "too many code attempts for this address from this client",
    "guesses": "too many code attempts for this address",
}


def _ip_limits(client_ip: str | None) -> list[Limit]:
    key = f"ratelimit:login-ip:{key_digest(client_network(client_ip))}"
    return [Limit("ip", key, settings.LOGIN_REQUESTS_PER_IP_PER_HOUR, _HOUR)]


def _address_limits(address: str, client_ip: str | None) -> list[Limit]:
    """The resend wait and the code budget per (address, client), and the address's own, higher, ceiling: one
    client alone cannot lock an address out. One hash tag, so the three are checked and spent atomically."""
    tag, client = f"ratelimit:{{login:{key_digest(address)}}}", key_digest(client_network(client_ip))
    resend = settings.LOGIN_RESEND_SECONDS
    return [
        Limit("resend", f"{tag}:resend:{client}", 1 if resend else 0, max(1, resend)),
        Limit("client", f"{tag}:client:{client}", settings.LOGIN_CODES_PER_ADDRESS_PER_CLIENT_PER_HOUR, _HOUR),
        Limit("address", f"{tag}:all", settings.LOGIN_CODES_PER_ADDRESS_PER_HOUR, _HOUR),
    ]


def _guess_limits(address: str, client_ip: str | None) -> list[Limit]:
    """Code attempts for one address, over all its challenges, per (address, client) and, with a higher ceiling,
    per address. The ceiling bounds the guesses at the address's codes however many clients ask (each challenge
    allows LOGIN_CODE_MAX_ATTEMPTS, and challenges spread over many clients must not multiply them); the
    per-client budget, below it, keeps one client from spending the ceiling: an attempt its own budget refuses
    spends nothing of the address's, so the owner on another network still has attempts left."""
    tag, client = f"ratelimit:{{login:{key_digest(address)}}}", key_digest(client_network(client_ip))
    per_client = settings.LOGIN_CODE_ATTEMPTS_PER_ADDRESS_PER_CLIENT_PER_HOUR
    return [
        Limit("client_guesses", f"{tag}:guesses:{client}", per_client, _HOUR),
        Limit("guesses", f"{tag}:guesses", settings.LOGIN_CODE_ATTEMPTS_PER_ADDRESS_PER_HOUR, _HOUR),
    ]


def _limit(limits: list[Limit]) -> None:
    try:
        verdict = buckets_hit(limits, fail_open=False)
    except RateLimitUnavailable as exc:
        raise LoginUnavailable("login is temporarily unavailable; retry later") from exc
    if not verdict.allowed:
        message = _REFUSALS[verdict.refused_by]
        raise LoginRateLimited(f"{message}; retry in {verdict.retry_after} s", verdict.retry_after)


def login_limits_clear(*, email: str | None = None, client_ip: str | None = None) -> int:
    """Lift the e-mail login limits of an address (its own and those of every client for it: their keys are
    found by their shared hash tag) and/or of a client IP (its own and its buckets for every address), as an
    operator's `clear_login_throttle` asks."""
    keys: list[str] = []
    if client_ip:
        keys += [limit.key for limit in _ip_limits(client_ip)]
        match = f"ratelimit:{{login:*}}:*:{key_digest(client_network(client_ip))}"
        keys += list(get_redis().scan_iter(match=match, count=1000))
    if email:
        tag = f"ratelimit:{{login:{key_digest(normalise_email(email))}}}"
        keys += list(get_redis().scan_iter(match=f"{tag}:*", count=1000))
    return buckets_clear(keys)


def login_start(*, email: object, client_ip: str | None) -> Challenge:
    _limit(_ip_limits(client_ip))
    address = normalise_email(email)
    _limit(_address_limits(address, client_ip))
    agent = Agent.objects.filter(email=address, is_active=True).first()
    may_sign_up = agent is None and settings.EIGENFLUX_OPEN_SIGNUP
    # Mail goes to the address the agent holds, never to the caller's text; the challenge records it, and
    # verifying holds the agent to it still.
    mail_to = agent.email if agent is not None and agent.email else address
    code = f"{secrets.randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"
    challenge_id = f"ch_{uuid.uuid4()}"
    ttl = settings.LOGIN_CODE_TTL_SECONDS
    LoginChallenge.objects.create(
        challenge_id=challenge_id,
        email=mail_to,
        agent=agent,
        may_sign_up=may_sign_up,
        code_hash=code_hash(challenge_id, code),
        client_ip=client_ip,
        expires_at=timezone.now() + timedelta(seconds=ttl),
    )
    if agent is not None or may_sign_up:
        context = {
            "code": code,
            "challenge_id": challenge_id,
            "minutes": ttl // 60,
            "attempts": settings.LOGIN_CODE_MAX_ATTEMPTS,
        }
        _mail(mail_to, "login/code", context)
    else:
        # Mail either way, so neither the answer nor its timing tells whether the address is registered.
        _mail(mail_to, "login/no_account", {})
    return Challenge(challenge_id=challenge_id, expires_in=ttl, resend_after=settings.LOGIN_RESEND_SECONDS)


def _mail(email: str, template: str, context: dict) -> None:
    subject = " ".join(render_to_string(f"{template}_subject.txt", context).split())
    body = render_to_string(f"{template}_body.txt", context)
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [email], fail_silently=False)
    except Exception as exc:  # any backend's failure (SMTP, DNS, auth) means the same to the caller
        log.error("login mail not sent: %s", exc.__class__.__name__)
        raise LoginUnavailable("the login code could not be sent; retry later") from exc


def login_verify(*, challenge_id: object, code: object, client_ip: str | None) -> Session:
    _limit(_ip_limits(client_ip))
    if not isinstance(challenge_id, str) or not challenge_id or len(challenge_id) > 64:
        raise LoginError("invalid or expired code")
    if not isinstance(code, str) or not (code.isascii() and code.isdigit() and len(code) == CODE_DIGITS):
        raise LoginError(f"the code must be {CODE_DIGITS} digits")
    now = timezone.now()
    max_attempts = settings.LOGIN_CODE_MAX_ATTEMPTS
    # The attempt is counted before the code is compared, atomically, so parallel guesses share the budget.
    counted = LoginChallenge.objects.filter(
        challenge_id=challenge_id, used_at__isnull=True, expires_at__gt=now, attempts__lt=max_attempts
    ).update(attempts=F("attempts") + 1)
    challenge = LoginChallenge.objects.select_related("agent").filter(challenge_id=challenge_id).first()
    if not counted or challenge is None:
        if challenge is not None and challenge.used_at is None and challenge.expires_at > now:
            raise LoginError("too many attempts; run `eigenflux auth login` again for a new code")
        raise LoginError("invalid or expired code; run `eigenflux auth login` again for a new code")
    # Every attempt spends one of the client's and the address's budgets before the code is compared (atomic, so
    # parallel guesses cannot overshoot them).
    guess_limits = _guess_limits(challenge.email, client_ip)
    _limit(guess_limits)
    left = max_attempts - challenge.attempts
    registered = challenge.agent is not None or challenge.may_sign_up
    if not (registered and hmac.compare_digest(challenge.code_hash, code_hash(challenge_id, code))):
        raise LoginError(f"invalid code ({left} attempt{'s' if left != 1 else ''} left)")
    with transaction.atomic():
        if not LoginChallenge.objects.filter(pk=challenge.pk, used_at__isnull=True).update(used_at=now):
            raise LoginError("invalid or expired code; run `eigenflux auth login` again for a new code")
        agent, created = _agent_for(challenge)
        issued = agent_token_create(agent=agent, label=EMAIL_LOGIN_LABEL)
    # The mailbox is proven: this client's own slips are forgiven (never the address's ceiling, which an attacker
    # holding one mailbox must not reset for the others).
    _forgive(guess_limits[0])
    return Session(agent=agent, issued=issued, is_new_agent=created)


def _forgive(limit: Limit) -> None:
    try:
        buckets_clear([limit.key])
    except redis.RedisError as exc:
        log.warning("login attempts not forgiven (Redis unavailable: %s)", exc.__class__.__name__)


def _agent_for(challenge: LoginChallenge) -> tuple[Agent, bool]:
    if challenge.agent is not None:
        # The code went to challenge.email: it proves that mailbox, so the agent must still hold it.
        if not Agent.objects.filter(pk=challenge.agent.pk, is_active=True, email=challenge.email).exists():
            raise LoginError("invalid or expired code; run `eigenflux auth login` again for a new code")
        return challenge.agent, False
    existing = Agent.objects.filter(email=challenge.email).first()
    if existing is not None:  # signed up meanwhile (another challenge for the same address)
        if not existing.is_active:
            raise LoginError("invalid or expired code; run `eigenflux auth login` again for a new code")
        return existing, False
    try:
        with transaction.atomic():
            agent = _agent_create_for_address(challenge.email)
    except IntegrityError:  # a parallel verify for the same address created it first
        return Agent.objects.get(email=challenge.email), False
    return agent, True


def _agent_create_for_address(email: str) -> Agent:
    """A new agent named after the address's local part or, when another agent holds that name (names ignore
    case and width) or it is reserved or unusable, `agent-<random>`: the client asks a new agent to choose
    its name anyway, and signing up must not fail on a name nobody typed."""
    candidates = [email.split("@", 1)[0][:100] or "agent", *(f"agent-{secrets.token_hex(4)}" for _ in range(3))]
    for name in candidates[:-1]:
        try:
            return agent_create(name=name, email=email)
        except AgentNameRefused:
            continue
    return agent_create(name=candidates[-1], email=email)


def login_challenges_prune() -> int:
    """Forget challenges that expired over a day ago (the maintenance job); returns how many."""
    deleted, _ = LoginChallenge.objects.filter(expires_at__lt=timezone.now() - timedelta(days=1)).delete()
    return deleted
