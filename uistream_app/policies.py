"""Who may use an endpoint, and how often: authentication, permission and
throttle classes in Django REST framework's shapes, so DRF's own classes
(``IsAuthenticated``, ``UserRateThrottle``, ``ScopedRateThrottle``, token
authentication…) work unchanged on every transport (docs/architecture.md,
"Policies").

A view lists them as ``authentication_classes``, ``permission_classes`` and
``throttle_classes`` (defaults from ``UISTREAM``); ``check_policies`` applies
them to a DRF ``Request`` (HTTP) or a ``SocketRequest`` (one WebSocket
send) and raises the house's ``BadRequest`` (401, 403, 429 with
``Retry-After``).

The address an anonymous visitor is counted by is ``client_address``:
``REMOTE_ADDR``, unless the project says how many proxies stand in front
of it (DRF's ``REST_FRAMEWORK["NUM_PROXIES"]``), and only then a hop of
``X-Forwarded-For``. DRF's own ``get_ident`` believes the whole header when
``NUM_PROXIES`` is unset, which lets a client pick its own counter; the
house's throttles don't (check W040 says where DRF's would).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from django.core.cache import cache
from django.http.request import HttpHeaders
from django.utils import timezone
from rest_framework import exceptions as drf_exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from .conf import import_from_string
from .conf import settings as uistream_settings
from .errors import BadRequest, Codes, NotAuthenticated, PermissionDenied, Throttled, from_status
from .lifecycle.spend import in_period, period_bounds, spend_of
from .models import Run
from .owners import Owner

__all__ = [
    "AllowAnonymousSessions",
    "ChatRateThrottle",
    "DailyBudget",
    "DjangoSessionAuthentication",
    "FeedbackRateThrottle",
    "MaxActiveRunsThrottle",
    "MonthlyBudget",
    "OwnerBudget",
    "Policies",
    "SocketRequest",
    "anonymous_refusal",
    "check_policies",
    "client_address",
    "load_classes",
    "translate_api_exception",
]


def load_classes(value: Iterable[Any], setting: str = "a policy list") -> list[type]:
    """Classes, or dotted paths to them; ``setting`` names the list in the
    ``ImproperlyConfigured`` of one that can't be imported
    (``"UISTREAM['PERMISSION_CLASSES']"``, ``"'ChatView.permission_classes'"``)."""
    return [import_from_string(item, setting, entry=True) if isinstance(item, str) else item for item in value]


class Policies:
    """Who may use an endpoint, and how often: the class attributes every
    transport reads (the stream views, the WebSocket consumer, the API).
    None takes the ``UISTREAM`` default; throttles apply where
    ``starts_runs``."""

    authentication_classes: Sequence[Any] | None = None
    permission_classes: Sequence[Any] | None = None
    throttle_classes: Sequence[Any] | None = None
    #: DRF's ``ScopedRateThrottle`` reads it.
    throttle_scope: str = "chat"
    #: None: ``UISTREAM["ALLOW_ANONYMOUS"]``.
    allow_anonymous: bool | None = None
    #: Whether a request here starts a run (the run throttles apply).
    starts_runs: ClassVar[bool] = False

    def get_allow_anonymous(self) -> bool:
        """Whether a visitor who is not signed in may chat (by session)."""
        if self.allow_anonymous is not None:
            return self.allow_anonymous
        return uistream_settings.ALLOW_ANONYMOUS

    def get_authenticators(self) -> list[Any]:
        classes = self._policy_classes("authentication_classes", uistream_settings.AUTHENTICATION_CLASSES)
        return [cls() for cls in classes]

    def get_permission_classes(self) -> list[type]:
        return self._policy_classes("permission_classes", uistream_settings.PERMISSION_CLASSES)

    def get_throttle_classes(self) -> list[type]:
        return self._policy_classes("throttle_classes", uistream_settings.THROTTLE_CLASSES if self.starts_runs else ())

    def get_steering_throttle_classes(self) -> list[type]:
        """The throttles of a message sent to a running answer (steer,
        queue): the run throttles, less those that count the runs in flight
        (``counts_active_runs``: a steering message starts none, and needs
        one running)."""
        classes = self._policy_classes("throttle_classes", uistream_settings.THROTTLE_CLASSES)
        return [cls for cls in classes if not getattr(cls, "counts_active_runs", False)]

    def _policy_classes(self, attribute: str, default: Sequence[Any]) -> list[type]:
        """The view's ``attribute`` (``permission_classes``…), else the
        ``UISTREAM`` default, imported; an import error names which."""
        classes = getattr(self, attribute)
        if classes is None:
            return load_classes(default, f"UISTREAM[{attribute.upper()!r}]")
        return load_classes(classes, f"'{type(self).__name__}.{attribute}'")


class DjangoSessionAuthentication(BaseAuthentication):
    """The user Django's ``AuthenticationMiddleware`` (HTTP) or Channels'
    ``AuthMiddlewareStack`` (WebSocket) found. CSRF is checked by the
    pipeline, before authentication, so this class does not check it again
    (DRF's ``SessionAuthentication`` does, and works too)."""

    def authenticate(self, request: Any) -> tuple[Any, None] | None:
        user = getattr(request._request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        return (user, None)

    def authenticate_header(self, request: Any) -> str | None:
        return None


class AllowAnonymousSessions(BasePermission):
    """A signed-in user; or, where the view allows anonymous chats
    (``allow_anonymous`` / ``UISTREAM["ALLOW_ANONYMOUS"]``), anyone, owning
    conversations by session.

    The refusal (401 ``not_authenticated``, an ``error`` frame on the
    WebSocket) names what turns anonymous chats on (``anonymous_refusal``),
    always, not only under ``DEBUG``: the first to meet it is the
    developer trying the endpoint, and a setting's name is no secret (the
    package is open source); a client that shows refusals to its users
    words them by ``code`` (a consumer by ``get_error_text``)."""

    message = "log in to chat"

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        if user is not None and user.is_authenticated:
            return True
        if view.get_allow_anonymous():
            return True
        self.message = anonymous_refusal(view)
        return False


def anonymous_refusal(view: Any) -> str:
    """The text of a refused anonymous request: log in, or where the
    switch is that allows anonymous chats on ``view`` (its own
    ``allow_anonymous``, an override of ``get_allow_anonymous()``, else
    ``UISTREAM["ALLOW_ANONYMOUS"]``)."""
    name = type(view).__name__
    if type(view).get_allow_anonymous is not Policies.get_allow_anonymous:
        return f"log in to chat (anonymous chats are off: '{name}.get_allow_anonymous()' returned False)"
    if getattr(view, "allow_anonymous", None) is not None:
        switch = f"'{name}.allow_anonymous' = True"
    else:
        switch = "UISTREAM['ALLOW_ANONYMOUS'] = True"
    return f"log in to chat (anonymous chats are off; {switch} lets visitors chat by their session)"


def session_key_of(request: Any) -> str | None:
    session = getattr(request._request, "session", None)
    key = getattr(session, "session_key", None) if session is not None else None
    return key if isinstance(key, str) and key else None


def client_address(request: Any) -> str | None:
    """The address a throttle counts an anonymous request by: the peer's
    (``REMOTE_ADDR``; under a server that rewrites it from proxy headers,
    as uvicorn does for a trusted peer, what that server made of them),
    unless ``REST_FRAMEWORK["NUM_PROXIES"]`` says how many proxies append
    to ``X-Forwarded-For``: then the hop that many from the right (the
    address the outermost trusted proxy saw), as DRF picks it. ``None`` or
    ``0``: the header chooses nothing, since any client can send one."""
    remote = request.META.get("REMOTE_ADDR")
    proxies = api_settings.NUM_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    if not proxies or not forwarded:
        return str(remote) if remote else None
    hops = str(forwarded).split(",")
    return hops[-min(int(proxies), len(hops))].strip()


class ChatRateThrottle(SimpleRateThrottle):
    """Runs started per owner: a signed-in user by user, an anonymous
    visitor by client address (as DRF's ``AnonRateThrottle``: a session is
    shed by dropping a cookie, and a visitor's first request has none yet),
    counted across the useChat POST, WebSocket sends and AG-UI runs: they
    share the scope ``chat`` and so one counter. The address is
    ``client_address``'s (``X-Forwarded-For`` only behind configured
    proxies). The rate comes from
    ``UISTREAM["THROTTLE_RATES"]["chat"]`` (e.g. ``"5/min"``), else from
    DRF's ``DEFAULT_THROTTLE_RATES``; none set: no limit."""

    scope = "chat"

    def get_rate(self) -> str | None:
        rates = uistream_settings.THROTTLE_RATES
        if self.scope in rates:
            return rates[self.scope]
        return self.THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request: Any, view: Any) -> str:
        user = request.user
        ident = f"user-{user.pk}" if user is not None and user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def get_ident(self, request: Any) -> str:
        """The anonymous request's address (``client_address``), not DRF's
        reading of ``X-Forwarded-For``."""
        return client_address(request) or ""


class FeedbackRateThrottle(ChatRateThrottle):
    """Feedback sent per owner (the conversations API's ``feedback``
    endpoint), counted as ``ChatRateThrottle`` counts: scope
    ``feedback``, ``UISTREAM["THROTTLE_RATES"]["feedback"]``, else DRF's
    ``DEFAULT_THROTTLE_RATES``, else ``DEFAULT_RATE``: a rating is one click,
    and a client that sends hundreds a minute is not a person."""

    scope = "feedback"
    DEFAULT_RATE = "60/min"

    def get_rate(self) -> str | None:
        rates = uistream_settings.THROTTLE_RATES
        if self.scope in rates:
            return rates[self.scope]
        return self.THROTTLE_RATES.get(self.scope, self.DEFAULT_RATE)


class MaxActiveRunsThrottle(BaseThrottle):
    """At most ``UISTREAM["MAX_ACTIVE_RUNS_PER_OWNER"]`` runs streaming at
    once per owner (None: no cap), across all their chats."""

    wait_seconds = 1.0
    #: Steering messages are not throttled by it (``get_steering_throttle_classes``).
    counts_active_runs: ClassVar[bool] = True

    def allow_request(self, request: Any, view: Any) -> bool:
        limit = uistream_settings.MAX_ACTIVE_RUNS_PER_OWNER
        if limit is None:
            return True

        user = request.user
        if user is not None and user.is_authenticated:
            runs = Run.objects.filter(conversation__owner=user)
        else:
            key = session_key_of(request)
            if key is None:
                return True  # no session yet: nothing of theirs runs
            runs = Run.objects.filter(conversation__owner=None, conversation__session_key=key)
        return bool(runs.filter(status=Run.Status.RUNNING).count() < int(limit))

    def wait(self) -> float | None:
        return self.wait_seconds


class OwnerBudget(BaseThrottle):
    """What one owner may spend per ``period`` (``"day"`` or ``"month"``,
    calendar periods in ``TIME_ZONE``): ``tokens`` (input plus output)
    and/or ``cost`` (by ``UISTREAM["PRICES"]``), from
    ``UISTREAM["BUDGETS"][period]`` unless ``get_budget`` says otherwise
    (override it to give users budgets of their own). An owner over
    budget is refused with 429 ``budget_exceeded``, ``Retry-After`` the
    seconds until the period resets and ``resets_at`` in the body.

    Concurrent runs: a run still running has no stored usage yet, so it
    counts as a reservation (``reserve_tokens`` / ``reserve_cost``,
    default 1% of the budget; set it to what one run may spend, e.g. its
    ``RunUsageLimit``): an owner is admitted while spent + reservations
    stays under the budget. Between this check and the run's row there is
    a gap; where the next run would use up the budget (the last admission),
    admissions of the owner go one at a time: the first takes a lock in
    Django's cache for ``admission_seconds`` (by then its row exists and
    counts), a second one meanwhile is refused with that ``Retry-After``.
    So two runs started at once can't both slip past a nearly-spent budget,
    and the budget is overshot by at most one run's usage."""

    period: ClassVar[str] = "day"
    admission_seconds: ClassVar[int] = 5

    def __init__(self) -> None:
        self._refusal: BadRequest | None = None

    def get_budget(self, request: Any, view: Any) -> dict[str, Any]:
        """``{"tokens": N, "cost": X, "reserve_tokens": n, "reserve_cost": x}``
        (any of them); empty: no budget."""
        budgets = uistream_settings.BUDGETS
        return dict(budgets.get(self.period) or {})

    def now(self) -> Any:
        """The moment the request is checked at (its period's)."""
        return timezone.now()

    def owner_runs(self, request: Any) -> Any:
        """The runs of the request's owner (None: an anonymous visitor with
        no session yet, who has spent nothing)."""
        user = request.user
        if user is not None and user.is_authenticated:
            return Run.objects.filter(conversation__owner=user), Owner.of_user(user).ident
        key = session_key_of(request)
        if key is None:
            return None, ""
        # The cache key holds a digest of the session key, never the key (a credential).
        return Run.objects.filter(conversation__owner=None, conversation__session_key=key), Owner.of_session(key).ident

    def allow_request(self, request: Any, view: Any) -> bool:
        budget = self.get_budget(request, view)
        limits: dict[str, Any] = {name: budget[name] for name in ("tokens", "cost") if budget.get(name) is not None}
        if not limits:
            return True
        runs, ident = self.owner_runs(request)
        if runs is None:
            return True
        now = self.now()
        start, end = period_bounds(self.period, now)
        spend = spend_of(in_period(runs, start, end))
        last = False
        for name, value in limits.items():
            allowed = float(value)
            reserve = float(budget.get(f"reserve_{name}", allowed / 100))
            # Usage of runs still running is not stored yet: reserved.
            spent = (spend.tokens if name == "tokens" else spend.cost) + spend.running * reserve
            if spent >= allowed:
                seconds = max(1, math.ceil((end - now).total_seconds()))
                self._refusal = Throttled(
                    f"budget exceeded: the {self.period}'s {name} budget is spent; it resets at {end.isoformat()}",
                    code=Codes.BUDGET_EXCEEDED,
                    headers={"Retry-After": str(seconds)},
                    details={"budget": f"{self.period}:{name}", "resets_at": end.isoformat()},
                )
                return False
            last = last or spent + reserve >= allowed
        if last:
            key = f"uistream-budget-admission-{self.period}-{ident}"
            if not cache.add(key, 1, self.admission_seconds):
                self._refusal = Throttled(
                    f"budget nearly spent: another run of yours is starting; try again in "
                    f"{self.admission_seconds} seconds",
                    code=Codes.BUDGET_EXCEEDED,
                    headers={"Retry-After": str(self.admission_seconds)},
                    details={"budget": f"{self.period}:admission", "resets_at": end.isoformat()},
                )
                return False
        return True

    def refusal(self) -> BadRequest | None:
        """The answer to a refused request (``check_policies`` raises it)."""
        return self._refusal

    def wait(self) -> float | None:
        return None


class DailyBudget(OwnerBudget):
    """``OwnerBudget`` per calendar day: ``UISTREAM["BUDGETS"]["day"]``."""

    period = "day"


class MonthlyBudget(OwnerBudget):
    """``OwnerBudget`` per calendar month: ``UISTREAM["BUDGETS"]["month"]``."""

    period = "month"


class SocketRequest:
    """One WebSocket send as the request DRF's permission and throttle
    classes read: ``user``, ``session``, ``META`` (the client address and
    the handshake's headers), ``headers`` (the same headers, as Django's
    ``HttpRequest.headers``: DRF's ``get_ident`` reads them), ``method``."""

    method = "POST"

    def __init__(self, scope: dict[str, Any], user: Any) -> None:
        self.user = user
        self.auth = None
        self.session = scope.get("session")
        self._request = self
        self.successful_authenticator = object() if user is not None and user.is_authenticated else None
        self.authenticators: Sequence[Any] = ()
        meta: dict[str, Any] = {}
        client = scope.get("client")
        if client:
            meta["REMOTE_ADDR"] = client[0]
        for name, value in scope.get("headers", ()):
            key = name.decode("latin-1").upper().replace("-", "_")
            meta["HTTP_" + key] = value.decode("latin-1")
        self.META = meta
        self.headers = HttpHeaders(meta)


def check_policies(
    request: Any, view: Any, permission_classes: Iterable[type], throttle_classes: Iterable[type]
) -> None:
    """Permissions, then throttles (sync: they may read the cache or the
    database). Raises ``BadRequest``: 401 for a request nobody authenticated,
    403, or 429 with ``Retry-After``."""
    for permission_class in permission_classes:
        permission = permission_class()
        if not permission.has_permission(request, view):
            message = getattr(permission, "message", None)
            if not request.successful_authenticator:
                raise NotAuthenticated(str(message) if message else None)
            raise PermissionDenied(str(message) if message else None)
    denied = False
    waits: list[float] = []
    for throttle_class in throttle_classes:
        throttle = throttle_class()
        if not throttle.allow_request(request, view):
            refusal = getattr(throttle, "refusal", None)
            answer = refusal() if callable(refusal) else None
            if isinstance(answer, BadRequest):
                raise answer  # a budget's own 429, with when it resets
            denied = True
            wait = throttle.wait()
            if wait is not None:
                waits.append(float(wait))
    if denied:
        raise throttled(max(waits) if waits else None)


def throttled(wait: float | None) -> Throttled:
    """429, with ``Retry-After`` in whole seconds when known."""
    if wait is None:
        return Throttled()
    seconds = max(1, math.ceil(wait))
    return Throttled(f"too many requests: try again in {seconds} seconds", headers={"Retry-After": str(seconds)})


def translate_api_exception(exc: drf_exceptions.APIException) -> BadRequest:
    """A DRF exception (raised by an authentication class) as the house's answer."""
    if isinstance(exc, drf_exceptions.Throttled):
        return throttled(getattr(exc, "wait", None))
    codes = exc.get_codes()
    code = codes if isinstance(codes, str) else Codes.INVALID
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return from_status(str(detail), code=code, status=int(exc.status_code))
