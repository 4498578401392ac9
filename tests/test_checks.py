"""Each system check id, and the whole ``check`` command."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings
from django.urls import include, path

from uistream_app.checks import check_middleware, check_policies, check_routed_chat_models, check_settings
from uistream_app.conf import NUMERIC_SETTINGS, settings
from uistream_app.protocol import events as ev
from uistream_app.views import AGUIView, ChatView


def ids(messages: list) -> list[str]:
    return [m.id for m in messages]


def test_defaults_pass() -> None:
    with override_settings(UISTREAM={}):
        assert check_settings() == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([], ["uistream_app.E001"]),
        ({"MAX_STEP": 3}, ["uistream_app.E001"]),
        ({"MODEL": "no.such.module.Model"}, ["uistream_app.E002"]),
        ({"MODEL": "collections.OrderedDict"}, ["uistream_app.E009"]),
        ({"MODEL": "math.pi"}, ["uistream_app.E009"]),
        ({"TOOLS": ["no.such.tool"]}, ["uistream_app.E002"]),
        ({"TOOL_APPROVAL": "no.such.policy"}, ["uistream_app.E002"]),
        ({"SDK_VERSION": 4}, ["uistream_app.E003"]),
        ({"ON_DISCONNECT": "ignore"}, ["uistream_app.E004"]),
        ({"ON_OWNER_LOST": "retry"}, ["uistream_app.E014"]),
        ({"MAX_STEPS": 0}, ["uistream_app.E005"]),
        ({"KEEPALIVE_SECONDS": "15"}, ["uistream_app.E005"]),
        ({"FLUSH_EVERY_MS": True}, ["uistream_app.E005"]),
        ({"LOG_WRITER": "sometimes"}, ["uistream_app.E007"]),
        ({"HEARTBEAT_SECONDS": 0}, ["uistream_app.E005"]),
        ({"LEASE_SECONDS": "20"}, ["uistream_app.E005"]),
        ({"SYNC_THREADS": 0}, ["uistream_app.E005"]),
        ({"SYNC_THREADS": "4"}, ["uistream_app.E005"]),
        ({"SHUTDOWN_GRACE_SECONDS": -1}, ["uistream_app.E005"]),
        ({"SHUTDOWN_GRACE_SECONDS": "5"}, ["uistream_app.E005"]),
        ({"SHUTDOWN_GRACE_SECONDS": 0, "SYNC_THREADS": 8, "MAX_REQUEST_BYTES": None}, []),
        ({"HEARTBEAT_SECONDS": 5, "LEASE_SECONDS": 10}, ["uistream_app.E012"]),
        ({"LEASE_SECONDS": 9}, ["uistream_app.E012"]),
        ({"HEARTBEAT_SECONDS": 0.5, "LEASE_SECONDS": 2}, []),
    ],
)
def test_each_error_id(value: object, expected: list[str]) -> None:
    with override_settings(UISTREAM=value):
        messages = check_settings()
    assert ids(messages) == expected
    assert all(m.hint for m in messages)


def test_every_number_in_defaults_is_a_numeric_setting() -> None:
    from uistream_app.conf import DEFAULTS, NUMERIC_SETTINGS

    numbers = {k for k, v in DEFAULTS.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    assert numbers <= NUMERIC_SETTINGS
    assert {"SYNC_THREADS", "SHUTDOWN_GRACE_SECONDS", "MAX_REQUEST_BYTES"} <= NUMERIC_SETTINGS


@pytest.mark.parametrize("key", sorted(NUMERIC_SETTINGS))
def test_every_numeric_setting_is_checked(key: str) -> None:
    with override_settings(UISTREAM={key: "many"}):
        messages = [*check_settings(), *check_policies()]
    assert [m.id for m in messages if f"UISTREAM[{key!r}] = 'many'" in m.msg] in (
        ["uistream_app.E005"],
        ["uistream_app.E003"],  # SDK_VERSION
        ["uistream_app.E010"],  # the counts
    )


def test_unknown_key_names_the_key() -> None:
    with override_settings(UISTREAM={"MAX_STEP": 3}):
        (message,) = check_settings()
    assert "'MAX_STEP'" in message.msg


def test_gzip_middleware_warns() -> None:
    from django.conf import settings as dj

    with override_settings(MIDDLEWARE=["django.middleware.gzip.GZipMiddleware", *dj.MIDDLEWARE]):
        assert ids(check_middleware()) == ["uistream_app.W001"]
    assert check_middleware() == []


@pytest.mark.django_db
def test_check_command_fails_on_a_bad_model() -> None:
    call_command("check")
    with override_settings(UISTREAM={"MODEL": "no.such.Model"}), pytest.raises(SystemCheckError, match="E002"):
        call_command("check")


def test_settings_read_defaults_and_reset_on_change() -> None:
    assert settings.MAX_STEPS == 8
    with override_settings(UISTREAM={"MAX_STEPS": 3}):
        assert settings.MAX_STEPS == 3
    assert settings.MAX_STEPS == 8
    with pytest.raises(AttributeError, match="Invalid uistream setting"):
        _ = settings.NOPE


def test_every_key_is_a_typed_property() -> None:
    from uistream_app.conf import DEFAULTS, UIStreamSettings

    missing = [key for key in DEFAULTS if not isinstance(getattr(UIStreamSettings, key, None), property)]
    assert missing == []
    with override_settings(UISTREAM={"LEASE_SECONDS": 30, "MAX_FILE_BYTES": 3, "BUDGETS": None}):
        assert (settings.LEASE_SECONDS, settings.MAX_REQUEST_BYTES, settings.BUDGETS) == (30.0, 1024 * 1024 + 12, {})


def test_import_setting_names_the_key() -> None:
    with override_settings(UISTREAM={"MODEL": "no.such.Model"}), pytest.raises(ImproperlyConfigured, match="'MODEL'"):
        settings.import_setting("MODEL")
    with override_settings(UISTREAM={"MODEL": "collections.OrderedDict"}):
        import collections

        assert settings.import_setting("MODEL") is collections.OrderedDict


@pytest.mark.parametrize(
    ("uistream", "view", "read", "message"),
    [
        ({"EXECUTOR": "no.such.Runner"}, {}, "executor", "UISTREAM['EXECUTOR'] = 'no.such.Runner'"),
        ({"TOOLS": ["no.such.tool"]}, {}, "get_tools", "UISTREAM['TOOLS'] entry 'no.such.tool'"),
        ({}, {"tools": ["no.such.tool"]}, "get_tools", "'ChatView.tools' entry 'no.such.tool'"),
        ({"TOOL_APPROVAL": "no.such.policy"}, {}, "get_tool_approval", "UISTREAM['TOOL_APPROVAL'] = 'no.such.policy'"),
        (
            {"PERMISSION_CLASSES": ["no.such.Permission"]},
            {},
            "get_permission_classes",
            "UISTREAM['PERMISSION_CLASSES'] entry 'no.such.Permission'",
        ),
        (
            {},
            {"throttle_classes": ["no.such.Throttle"]},
            "get_throttle_classes",
            "'ChatView.throttle_classes' entry 'no.such.Throttle'",
        ),
        (
            {"HISTORY_STRATEGY": "no.such.Strategy"},
            {},
            "get_history_strategy",
            "UISTREAM['HISTORY_STRATEGY'] = 'no.such.Strategy'",
        ),
    ],
)
def test_a_dotted_path_that_cannot_be_imported_names_its_key(
    uistream: dict[str, Any], view: dict[str, Any], read: str, message: str
) -> None:
    from uistream_app.lifecycle.executors import executor_class

    chat_view = ChatView(**view)
    with override_settings(UISTREAM=uistream), pytest.raises(ImproperlyConfigured) as info:
        executor_class() if read == "executor" else getattr(chat_view, read)()
    assert str(info.value) == f"{message} cannot be imported: No module named 'no'"


def test_bad_broker_setting() -> None:
    from uistream_app.checks import check_broker

    with override_settings(UISTREAM={"BROKER": {"BACKEND": "carrier-pigeon"}}):
        assert ids(check_broker()) == ["uistream_app.E006"]
    with override_settings(UISTREAM={}):
        assert check_broker() == []


@pytest.mark.parametrize(
    ("uistream", "warned"),
    [
        ({}, False),  # 60 s keys, a run found within 20 + 5 s
        ({"ACTIVE_TTL": 30}, True),  # the keys of a run that died just before a refresh: 20 s
        ({"ACTIVE_TTL": 38}, False),
        ({"ACTIVE_TTL": 30, "LEASE_SECONDS": 16, "HEARTBEAT_SECONDS": 5}, True),  # found within 21 s; kept 20
        ({"ACTIVE_TTL": 30, "LEASE_SECONDS": 9, "HEARTBEAT_SECONDS": 4}, False),
    ],
)
def test_a_redis_broker_whose_keys_expire_before_the_sweep_warns(uistream: dict[str, Any], warned: bool) -> None:
    """A dead process's run must still be in Redis when the sweeper finds it:
    its stream holds the chunks its clients had that the log does not yet."""
    from uistream_app.checks import check_broker

    ttl = {"ACTIVE_TTL": uistream.pop("ACTIVE_TTL")} if "ACTIVE_TTL" in uistream else {}
    broker = {"BACKEND": "redis", "URL": "redis://127.0.0.1:6379/0", **ttl}
    with override_settings(UISTREAM={"BROKER": broker, **uistream}):
        messages = check_broker()
    assert ids(messages) == (["uistream_app.W006"] if warned else [])
    if warned:
        assert "sweeper" in messages[0].msg
        assert "ACTIVE_TTL more than" in (messages[0].hint or "")


def test_unreachable_redis_warns() -> None:
    from uistream_app.checks import check_broker_reachable

    # Port 9 on loopback: nothing listens there.
    broker = {"BACKEND": "redis", "URL": "redis://127.0.0.1:9/0"}
    with override_settings(UISTREAM={"BROKER": broker}):
        assert ids(check_broker_reachable()) == ["uistream_app.W003"]
    with override_settings(UISTREAM={}):
        assert check_broker_reachable() == []


def test_no_asgi_application_warns() -> None:
    from django.conf import settings as dj

    from uistream_app.checks import check_asgi

    apps = [a for a in dj.INSTALLED_APPS if a != "daphne"]
    with override_settings(ASGI_APPLICATION=None, INSTALLED_APPS=apps):
        assert ids(check_asgi()) == ["uistream_app.W002"]
    assert check_asgi() == []


class EchoModel:
    async def stream(self, messages: Any, tools: Any = (), options: Any = None) -> Any:
        yield ev.Finish("stop")


def make_echo_model() -> EchoModel:
    return EchoModel()


class ChatViewWithGetModel(ChatView):
    def get_model(self, context: Any) -> Any:
        return EchoModel()


class AGUIViewWithModel(AGUIView):
    model = EchoModel()


async def an_agent(context: Any) -> Any:
    yield ev.Finish("stop")


# The URLconfs of the MODEL checks. ROOT_URLCONF takes an object with
# ``urlpatterns`` as well as a module path, so each project fits in a class.
class BareChatViewProject:
    urlpatterns = (path("api/", include([path("chat", ChatView.as_view())])),)


class BareAGUIViewProject:
    urlpatterns = (path("agui", AGUIView.as_view()),)


class SubclassProject:
    urlpatterns = (path("chat", ChatViewWithGetModel.as_view()),)


class ViewsWithTheirOwnModelProject:
    urlpatterns = (
        path("a/", include([path("chat", ChatViewWithGetModel.as_view())])),
        path("chat", ChatView.as_view(model=EchoModel())),
        path("agui", AGUIViewWithModel.as_view()),
        path("agui-agent", AGUIView.as_view(agent=an_agent)),
    )


@pytest.mark.django_db
def test_a_routed_bare_chat_view_without_model_fails_the_check_command() -> None:
    with (
        override_settings(ROOT_URLCONF=BareChatViewProject, UISTREAM={}),
        pytest.raises(
            SystemCheckError, match=r"uistream_app\.E008.*/api/chat \(uistream_app\.transport\.chat_views\.ChatView\)"
        ),
    ):
        call_command("check")


@pytest.mark.django_db
def test_a_chat_view_subclass_with_get_model_passes_the_check_command() -> None:
    with override_settings(ROOT_URLCONF=SubclassProject, UISTREAM={}):
        call_command("check")


@pytest.mark.django_db
def test_an_unimportable_model_fails_the_check_command_naming_the_key() -> None:
    with (
        override_settings(ROOT_URLCONF=SubclassProject, UISTREAM={"MODEL": "no.such.Model"}),
        pytest.raises(
            SystemCheckError, match=r"E002.*UISTREAM\['MODEL'\] = 'no.such.Model' cannot be imported: No module"
        ),
    ):
        call_command("check")


def test_model_unset_is_an_error_only_for_views_that_would_read_it() -> None:
    with override_settings(ROOT_URLCONF=BareAGUIViewProject, UISTREAM={}):
        (message,) = check_routed_chat_models()
    assert message.id == "uistream_app.E008"
    assert "/agui (uistream_app.transport.agui_views.AGUIView)" in message.msg
    assert "UISTREAM['MODEL']" in message.hint
    with override_settings(ROOT_URLCONF=ViewsWithTheirOwnModelProject, UISTREAM={}):
        assert check_routed_chat_models() == []
    with override_settings(ROOT_URLCONF=BareChatViewProject, UISTREAM={"MODEL": EchoModel}):
        assert check_routed_chat_models() == []


def test_the_app_urls_need_model_and_the_demo_sets_it() -> None:
    # The test project routes the app's URLs (a bare ChatView and AGUIView)
    # and the demo's MODEL; without it both endpoints are named.
    assert check_routed_chat_models() == []
    with override_settings(UISTREAM={}):
        (message,) = check_routed_chat_models()
    assert "/api/chat (uistream_app.transport.chat_views.ChatView)" in message.msg
    assert "/api/agui (uistream_app.transport.agui_views.AGUIView)" in message.msg


@pytest.mark.parametrize("model", [EchoModel, EchoModel(), make_echo_model, "tests.test_checks.make_echo_model"])
def test_model_may_be_a_class_an_instance_or_a_factory(model: object) -> None:
    with override_settings(UISTREAM={"MODEL": model}):
        assert check_settings() == []


@pytest.mark.parametrize(
    ("changes", "wrong"),
    [
        ({"THROTTLE_CLASSES": ["no.such.Throttle"]}, "THROTTLE_CLASSES"),
        ({"PERMISSION_CLASSES": "rest_framework.permissions.IsAuthenticated"}, "PERMISSION_CLASSES"),
        ({"THROTTLE_RATES": {"chat": "5 per minute"}}, "THROTTLE_RATES"),
        ({"MAX_ACTIVE_RUNS_PER_OWNER": 0}, "MAX_ACTIVE_RUNS_PER_OWNER"),
        ({"HISTORY_MAX_MESSAGES": "all"}, "HISTORY_MAX_MESSAGES"),
    ],
)
def test_unusable_policy_settings_are_e010(changes: dict, wrong: str) -> None:
    with override_settings(UISTREAM={**django_settings.UISTREAM, **changes}):
        messages = [m for m in check_policies() if m.id == "uistream_app.E010"]
    assert len(messages) == 1
    assert wrong in messages[0].msg


def test_the_demo_chat_rate_passes_the_checks() -> None:
    with override_settings(UISTREAM={**django_settings.UISTREAM, "THROTTLE_RATES": {"chat": "5/min"}}):
        assert check_policies() == []


# -- MODEL by name ("anthropic:claude-…"): the check and get_model() -------------


@pytest.fixture
def fresh_spec_models() -> Any:
    from uistream_app.runs import shared_model

    shared_model.cache_clear()
    yield
    shared_model.cache_clear()


def test_a_model_name_with_its_key_set_passes_every_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with override_settings(UISTREAM={"MODEL": "anthropic:claude-sonnet-4-5"}):
        assert check_settings() == []
    # A name is a model: the routed bare views need nothing more (no E008).
    with override_settings(ROOT_URLCONF=BareChatViewProject, UISTREAM={"MODEL": "anthropic:claude-sonnet-4-5"}):
        assert check_routed_chat_models() == []


@pytest.mark.parametrize(
    ("spec", "unset", "in_hint"),
    [
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY", "Set ANTHROPIC_API_KEY"),
        ("openai-responses:gpt-5", "OPENAI_API_KEY", "Set OPENAI_API_KEY"),
        ("openai:", "OPENAI_API_KEY", "'openai:<model>'"),
        ("openai-compatible:http://localhost:11434/v1", "OPENAI_API_KEY", "#<model>"),
    ],
)
def test_a_model_name_without_its_key_or_malformed_is_e011(
    monkeypatch: pytest.MonkeyPatch, spec: str, unset: str, in_hint: str
) -> None:
    monkeypatch.delenv(unset, raising=False)
    with override_settings(UISTREAM={"MODEL": spec}):
        (message,) = check_settings()
    assert message.id == "uistream_app.E011"
    assert f"UISTREAM['MODEL'] = {spec!r}" in message.msg
    assert in_hint in message.hint


@pytest.mark.django_db
def test_a_model_name_without_its_key_fails_the_check_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with (
        override_settings(ROOT_URLCONF=SubclassProject, UISTREAM={"MODEL": "anthropic:claude-sonnet-4-5"}),
        pytest.raises(SystemCheckError, match=r"E011.*needs an API key"),
    ):
        call_command("check")


def test_get_model_resolves_a_model_name_once_per_process(
    monkeypatch: pytest.MonkeyPatch, fresh_spec_models: None
) -> None:
    from uistream_app.runs.anthropic import AnthropicModel

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with override_settings(UISTREAM={"MODEL": "anthropic:claude-sonnet-4-5"}):
        first, second = ChatView().get_model(), ChatView().get_model()
    assert isinstance(first, AnthropicModel)
    assert (first.model, first.api_key) == ("claude-sonnet-4-5", "sk-ant-test")
    assert second is first


def test_a_view_may_name_its_model_too(monkeypatch: pytest.MonkeyPatch, fresh_spec_models: None) -> None:
    from uistream_app.runs.openai_responses import OpenAIResponsesModel

    monkeypatch.setenv("OPENAI_API_KEY", "sk-oa-test")
    with override_settings(UISTREAM={}):
        model = ChatView(model="openai-responses:gpt-5").get_model()
    assert isinstance(model, OpenAIResponsesModel)
    assert model.model == "gpt-5"


def test_get_model_names_the_key_of_an_unusable_model_name(
    monkeypatch: pytest.MonkeyPatch, fresh_spec_models: None
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with (
        override_settings(UISTREAM={"MODEL": "anthropic:claude-sonnet-4-5"}),
        pytest.raises(
            ImproperlyConfigured, match=r"UISTREAM\['MODEL'\] = 'anthropic:claude-sonnet-4-5'.*ANTHROPIC_API_KEY"
        ),
    ):
        ChatView().get_model()


@pytest.mark.parametrize(
    ("key", "value", "check_id"),
    [
        ("USAGE_LIMITS", [{"output_tokns": 10}], "uistream_app.E030"),
        ("BUDGETS", {"days": {"tokens": 10}}, "uistream_app.E031"),
        ("BUDGETS", {"day": {"tokens": "lots"}}, "uistream_app.E031"),
        ("PRICES", {"gpt": {"input": 1, "outptu": 2}}, "uistream_app.E032"),
        ("HISTORY_STRATEGY", "uistream_app.history.NoSuchStrategy", "uistream_app.E033"),
        ("BUDGETS", {"month": {"cost": 5}}, "uistream_app.W030"),
    ],
)
def test_usage_and_history_settings_are_checked(key: str, value: Any, check_id: str) -> None:
    from uistream_app.checks import check_usage_settings

    with override_settings(UISTREAM={key: value}):
        assert [m.id for m in check_usage_settings()] == [check_id]


def test_usable_usage_and_history_settings_pass() -> None:
    from uistream_app.checks import check_usage_settings

    usable = {
        "USAGE_LIMITS": [{"output_tokens": 4000, "wall_seconds": 60}],
        "BUDGETS": {"day": {"tokens": 200_000, "reserve_tokens": 4000}, "month": {"cost": 20.0}},
        "PRICES": {"openai:gpt-4o": {"input": 2.5, "output": 10.0}},
        "HISTORY_STRATEGY": "uistream_app.history.AllMessages",
    }
    with override_settings(UISTREAM=usable):
        assert check_usage_settings() == []


# -- runserver serving WSGI (W005) -----------------------------------------------------

_NO_DAPHNE = [a for a in django_settings.INSTALLED_APPS if a != "daphne"]


@pytest.mark.parametrize(
    ("argv", "apps", "expected"),
    [
        (["manage.py", "runserver"], _NO_DAPHNE, ["uistream_app.W005"]),
        # daphne after staticfiles: staticfiles' runserver (WSGI) wins.
        (["manage.py", "runserver"], [*_NO_DAPHNE, "daphne"], ["uistream_app.W005"]),
        (["manage.py", "runserver"], ["daphne", *_NO_DAPHNE], []),
        # Not runserver: check, migrate, a deploy under uvicorn never see it.
        (["manage.py", "check"], _NO_DAPHNE, []),
        (["manage.py", "migrate"], _NO_DAPHNE, []),
        (["uvicorn", "demo_project.asgi:application"], _NO_DAPHNE, []),
    ],
)
def test_runserver_without_an_asgi_server_warns(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], apps: list[str], expected: list[str]
) -> None:
    from uistream_app.checks import check_runserver_serves_asgi

    monkeypatch.setattr("sys.argv", argv)
    with override_settings(INSTALLED_APPS=apps):
        messages = check_runserver_serves_asgi()
    assert ids(messages) == expected
    for message in messages:
        assert '"daphne" first in INSTALLED_APPS' in message.hint


@pytest.mark.django_db
def test_w005_is_silenced_by_its_id(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.argv", ["manage.py", "runserver"])
    # daphne's own check, registered at start-up, misreads an INSTALLED_APPS without it.
    daphne = ["daphne.E001"]
    with override_settings(INSTALLED_APPS=_NO_DAPHNE, SILENCED_SYSTEM_CHECKS=daphne):
        call_command("check")
        assert "uistream_app.W005" in capsys.readouterr().err
        with override_settings(SILENCED_SYSTEM_CHECKS=[*daphne, "uistream_app.W005"]):
            call_command("check")
        assert "W005" not in capsys.readouterr().err


# -- anonymous throttles and caps (W040, W041) ----------------------------------------------

CHAT_RATE = {
    "ALLOW_ANONYMOUS": True,
    "THROTTLE_CLASSES": ["uistream_app.policies.ChatRateThrottle"],
    "THROTTLE_RATES": {"chat": "5/min"},
}


@pytest.mark.parametrize(
    ("uistream", "rest_framework", "expected"),
    [
        (CHAT_RATE, {}, ["uistream_app.W040"]),
        (CHAT_RATE, {"NUM_PROXIES": 1}, []),
        (CHAT_RATE, {"NUM_PROXIES": 0}, []),
        ({**CHAT_RATE, "ALLOW_ANONYMOUS": False}, {}, []),
        ({**CHAT_RATE, "THROTTLE_CLASSES": ["rest_framework.throttling.AnonRateThrottle"]}, {}, ["uistream_app.W040"]),
        ({"ALLOW_ANONYMOUS": True}, {}, []),  # the session caps are on by default
        (
            {
                "ALLOW_ANONYMOUS": True,
                "MAX_ACTIVE_RUNS_PER_SESSION": None,
                "MAX_STORED_BYTES_PER_SESSION_PER_DAY": None,
            },
            {},
            ["uistream_app.W041"],
        ),
        ({"ALLOW_ANONYMOUS": True, "MAX_ACTIVE_RUNS_PER_SESSION": None}, {}, []),
    ],
)
def test_anonymous_chats_bounded_by_a_throttle_or_a_cap(
    uistream: dict[str, Any], rest_framework: dict[str, Any], expected: list[str]
) -> None:
    from uistream_app.checks import check_anonymous_throttles

    with override_settings(UISTREAM=uistream, REST_FRAMEWORK=rest_framework):
        messages = check_anonymous_throttles()
    assert ids(messages) == expected
    assert all(m.hint for m in messages)


def test_w040_says_which_throttles_believe_the_header() -> None:
    from uistream_app.checks import check_anonymous_throttles

    drf = {**CHAT_RATE, "THROTTLE_CLASSES": ["rest_framework.throttling.AnonRateThrottle"]}
    with override_settings(UISTREAM=drf, REST_FRAMEWORK={}):
        (message,) = check_anonymous_throttles()
    assert "AnonRateThrottle" in message.msg
    assert "X-Forwarded-For" in message.msg
    with override_settings(UISTREAM=CHAT_RATE, REST_FRAMEWORK={}):
        (message,) = check_anonymous_throttles()
    assert "REMOTE_ADDR" in message.msg


@pytest.mark.parametrize("value", [0, -1, 1.5, "8", True])
def test_an_owner_cap_is_a_whole_number_or_none(value: object) -> None:
    for key in ("MAX_ACTIVE_RUNS_PER_USER", "MAX_STORED_BYTES_PER_SESSION_PER_DAY"):
        with override_settings(UISTREAM={key: value}):
            assert ids([*check_settings(), *check_policies()]) == ["uistream_app.E010"]
        with override_settings(UISTREAM={key: None}):
            assert ids([*check_settings(), *check_policies()]) == []


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_the_postgres_broker_needs_a_postgresql_database() -> None:
    from uistream_app.checks import check_broker, check_executor

    postgres = {"ENGINE": "django.db.backends.postgresql", "NAME": "chat", "HOST": "db"}
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}
    with override_settings(UISTREAM={"BROKER": {"BACKEND": "postgres"}}, DATABASES={"default": sqlite}):
        (message,) = check_broker()
    assert message.id == "uistream_app.E022"
    assert "DATABASES['default'] is 'django.db.backends.sqlite3'" in message.msg
    with override_settings(UISTREAM={"BROKER": {"BACKEND": "postgres", "DATABASE": "live"}}):
        assert [m.msg for m in check_broker()] == [
            "UISTREAM['BROKER'] = 'postgres' needs a PostgreSQL database: DATABASES['live'] is not in DATABASES."
        ]
    with override_settings(UISTREAM={"BROKER": {"BACKEND": "postgres"}}, DATABASES={"default": postgres}):
        assert check_broker() == []
    # A URL of its own: no alias to check.
    with override_settings(UISTREAM={"BROKER": {"BACKEND": "postgres", "URL": "postgres://db/chat"}}):
        assert check_broker() == []
    # It can carry runs to Celery workers, as Redis can.
    with override_settings(
        UISTREAM={"BROKER": {"BACKEND": "postgres"}, "EXECUTOR": "celery"}, DATABASES={"default": postgres}
    ):
        assert [m for m in check_executor() if "broker" in m.msg] == []
    with override_settings(UISTREAM={"EXECUTOR": "celery"}):
        assert [m.id for m in check_executor() if "broker of many processes" in m.msg] == ["uistream_app.E020"]
