"""E-mail login with one-time codes, as the EigenFlux client does it (`auth login`, then `auth verify`).

A login request sends a 6-digit code to the address and answers with a challenge id; verifying the code
issues an ordinary agent token (items.tokens). Codes are random, stored only as an HMAC keyed with
SECRET_KEY and salted with the challenge id, expire after LOGIN_CODE_TTL_SECONDS and allow
LOGIN_CODE_MAX_ATTEMPTS tries. Requests are limited per address and per client IP (fail closed: without
Redis there is no login). An address with no agent gets the same answer as a registered one (a challenge
that can never be verified, and a notice mail instead of a code), so the API does not reveal who is
registered; with EIGENFLUX_OPEN_SIGNUP the code is sent and verifying it creates the agent.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import F
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.crypto import salted_hmac

from items.models import Agent, LoginChallenge
from items.ratelimit import RateLimitUnavailable, rate_limit_window
from items.services.agents import AgentNameRefused, IssuedToken, agent_create, agent_token_create

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
    email = raw.strip() if isinstance(raw, str) else ""
    try:
        validate_email(email)
    except ValidationError:
        raise LoginError("invalid email format") from None
    if len(email) > 254:
        raise LoginError("invalid email format")
    return email


def code_hash(challenge_id: str, code: str) -> str:
    return salted_hmac("eigenflux.login-code", f"{challenge_id}:{code}", algorithm="sha256").hexdigest()


def _address_key(email: str) -> str:
    # Rate-limit keys carry a digest, not the address itself.
    return hashlib.sha256(email.casefold().encode("utf-8")).hexdigest()[:32]


def _limit(bucket: str, subject: str, limit: int, window_seconds: int, message: str) -> None:
    try:
        verdict = rate_limit_window(
            bucket=bucket, subject=subject, limit=limit, window_seconds=window_seconds, fail_open=False
        )
    except RateLimitUnavailable as exc:
        raise LoginUnavailable("login is temporarily unavailable; retry later") from exc
    if not verdict.allowed:
        raise LoginRateLimited(f"{message}; retry in {verdict.retry_after} s", verdict.retry_after)


def _limit_ip(client_ip: str | None) -> None:
    _limit(
        "login-ip", client_ip or "unknown", settings.LOGIN_REQUESTS_PER_IP_PER_HOUR, _HOUR, "too many login requests"
    )


def login_start(*, email: object, client_ip: str | None) -> Challenge:
    _limit_ip(client_ip)
    email = normalise_email(email)
    address = _address_key(email)
    if settings.LOGIN_RESEND_SECONDS:
        _limit("login-resend", address, 1, settings.LOGIN_RESEND_SECONDS, "a code was sent to this address just now")
    _limit(
        "login-address", address, settings.LOGIN_CODES_PER_ADDRESS_PER_HOUR, _HOUR, "too many codes for this address"
    )

    agent = Agent.objects.filter(email__iexact=email, is_active=True).first()
    may_sign_up = agent is None and settings.EIGENFLUX_OPEN_SIGNUP
    code = f"{secrets.randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"
    challenge_id = f"ch_{uuid.uuid4()}"
    ttl = settings.LOGIN_CODE_TTL_SECONDS
    LoginChallenge.objects.create(
        challenge_id=challenge_id,
        email=email,
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
        _mail(email, "login/code", context)
    else:
        # Mail either way, so neither the answer nor its timing tells whether the address is registered.
        _mail(email, "login/no_account", {})
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
    _limit_ip(client_ip)
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
    if not counted:
        if challenge is not None and challenge.used_at is None and challenge.expires_at > now:
            raise LoginError("too many attempts; run `eigenflux auth login` again for a new code")
        raise LoginError("invalid or expired code; run `eigenflux auth login` again for a new code")
    left = max_attempts - challenge.attempts
    registered = challenge.agent is not None or challenge.may_sign_up
    if not (registered and hmac.compare_digest(challenge.code_hash, code_hash(challenge_id, code))):
        raise LoginError(f"invalid code ({left} attempt{'s' if left != 1 else ''} left)")
    with transaction.atomic():
        if not LoginChallenge.objects.filter(pk=challenge.pk, used_at__isnull=True).update(used_at=now):
            raise LoginError("invalid or expired code; run `eigenflux auth login` again for a new code")
        agent, created = _agent_for(challenge)
        issued = agent_token_create(agent=agent, label="email login")
    return Session(agent=agent, issued=issued, is_new_agent=created)


def _agent_for(challenge: LoginChallenge) -> tuple[Agent, bool]:
    if challenge.agent is not None:
        if not Agent.objects.filter(pk=challenge.agent_id, is_active=True).exists():
            raise LoginError("invalid or expired code; run `eigenflux auth login` again for a new code")
        return challenge.agent, False
    existing = Agent.objects.filter(email__iexact=challenge.email).first()
    if existing is not None:  # signed up meanwhile (another challenge for the same address)
        if not existing.is_active:
            raise LoginError("invalid or expired code; run `eigenflux auth login` again for a new code")
        return existing, False
    try:
        with transaction.atomic():
            agent = _agent_create_for_address(challenge.email)
    except IntegrityError:  # a parallel verify for the same address created it first
        return Agent.objects.get(email__iexact=challenge.email), False
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
