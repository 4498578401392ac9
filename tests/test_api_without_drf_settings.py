"""The API and its schema in projects that did not configure DRF for it: a
fresh ``startproject`` with only ``"uistream_app"`` added (no
``rest_framework``, no ``drf_spectacular``, no ``REST_FRAMEWORK``), and one
whose ``REST_FRAMEWORK`` suits some other API (``api.base_views`` says
which settings the API pins and which it follows).

Each project runs in its own process (``tests.fresh_project``): DRF reads
its settings when its classes are defined and drf-spectacular when a views
module is imported, which ``override_settings`` here can't undo. The
browsable API with ``rest_framework`` installed is this process's (the
demo's settings install it and set no ``REST_FRAMEWORK``).
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from .fresh_project import BROWSER_ACCEPT, Reply, make_project, serve

#: The app's paths in its schema.
API_PATHS = {
    "/api/conversations/",
    "/api/conversations/{id}/",
    "/api/conversations/{id}/messages/",
    "/api/conversations/{id}/messages/{message_id}/feedback",
    "/api/conversations/{id}/messages/{message_id}/versions",
    "/api/conversations/feedback-reasons",
    "/api/runs/",
    "/api/runs/{id}/",
    "/api/runs/{id}/transcript/{transcript_format}/",
    "/api/usage/",
}

#: A warning or error of drf-spectacular's (``drainage.GeneratorStats.emit``).
SPECTACULAR_WARNING = re.compile(r"(?m)(^|: )(Warning|Error)( \[[^\]]*\])?: ")

NOT_ALLOWED = {"detail": "You do not have permission to perform this action."}
NO_CREDENTIALS = {"detail": "Authentication credentials were not provided."}

#: Settings of a project whose DRF serves another API: every default the
#: API's views could have taken from it is one that would break or change them.
OTHER_API_SETTINGS = """
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "rest_framework.schemas.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.BrowsableAPIRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.MultiPartParser"],
    # Takes the user Django's middleware found, and checks no CSRF.
    "DEFAULT_AUTHENTICATION_CLASSES": ["uistream_app.policies.DjangoSessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 1,
    "DEFAULT_FILTER_BACKENDS": ["rest_framework.filters.OrderingFilter"],
    "DEFAULT_VERSIONING_CLASS": "rest_framework.versioning.URLPathVersioning",
    "SEARCH_PARAM": "q",
    "ORDERING_PARAM": "sort",
    "DATETIME_FORMAT": "%d/%m/%Y",
    "UNAUTHENTICATED_USER": None,
}
"""

#: The project's own DRF view, described by DRF's schema class.
OTHER_API_URLS = """
from rest_framework.decorators import api_view
from rest_framework.response import Response


@api_view(["GET"])
def ping(request):
    return Response({"pong": True})


urlpatterns += [path("v1/ping/", ping)]
"""


def assert_no_failure(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert not SPECTACULAR_WARNING.search(stderr), stderr


def assert_json(reply: Reply, status: int) -> Any:
    assert (reply.status, reply.content_type) == (status, "application/json"), reply
    return reply.json()


def parameters(schema: dict[str, Any], path: str) -> set[str]:
    return {p["name"] for p in schema["paths"][path]["get"].get("parameters", [])}


def test_a_fresh_project_serves_the_schema_to_staff_and_json_to_a_browser(tmp_path: Path) -> None:
    # One project for both: each costs a process, a migrated database.
    project = make_project(tmp_path)
    browser = {"accept": BROWSER_ACCEPT}
    served = serve(
        project,
        [
            {"path": "/api/schema/?format=json", "user": "staff"},
            {"path": "/api/schema/", "user": "staff"},
            {"path": "/api/schema/", "user": "alice"},
            {"path": "/api/schema/?format=json"},
            {"path": "/api/conversations/", "method": "POST", "user": "alice", "json": {"title": "Trip"}},
            {"path": "/api/conversations/", "user": "alice", "headers": browser},
            {"path": "/api/usage/", "user": "alice", "headers": browser},
        ],
    )
    as_json, as_yaml, not_staff, anonymous, created, listed, usage = served.replies
    assert (as_json.status, as_json.content_type) == (200, "application/vnd.oai.openapi+json")
    schema = as_json.json()
    assert set(schema["paths"]) >= API_PATHS, sorted(schema["paths"])
    assert {"search", "ordering", "page", "page_size"} <= parameters(schema, "/api/conversations/")
    assert as_yaml.status == 200
    assert as_yaml.content_type.startswith("application/vnd.oai.openapi;")
    assert "\n  /api/conversations/:\n" in as_yaml.text
    assert assert_json(not_staff, 403) == NOT_ALLOWED
    assert assert_json(anonymous, 403) == NO_CREDENTIALS
    # No browsable API without DRF's templates: the JSON, for a browser too.
    chat_id = assert_json(created, 201)["id"]
    page = assert_json(listed, 200)
    assert [(c["id"], c["title"]) for c in page["results"]] == [(chat_id, "Trip")]
    assert set(assert_json(usage, 200)["periods"]) == {"day", "month"}
    assert_no_failure(served.stderr)


def test_a_project_whose_drf_settings_suit_another_api(tmp_path: Path) -> None:
    project = make_project(tmp_path, apps=["rest_framework"], settings=OTHER_API_SETTINGS, urls=OTHER_API_URLS)
    new = {"path": "/api/conversations/", "method": "POST", "user": "alice"}
    served = serve(
        project,
        [
            {**new, "json": {"id": "c1", "title": "B"}},
            {**new, "json": {"id": "c2", "title": "A"}},
            {"path": "/api/conversations/?ordering=title", "user": "alice"},
            {"path": "/api/conversations/?search=A", "user": "alice"},
            {"path": "/api/conversations/", "user": "alice", "headers": {"accept": BROWSER_ACCEPT}},
            {**new, "json": {"title": "forged"}, "enforce_csrf": True},
            {"path": "/api/conversations/"},
            {"path": "/api/schema/?format=json", "user": "staff"},
        ],
    )
    first, second, by_title, searched, browsable, forged, anonymous, schema_reply = served.replies
    assert assert_json(first, 201)["title"] == "B"
    assert assert_json(second, 201)["title"] == "A"
    # The API's own paging (20 a page), ordering and search parameters.
    page = assert_json(by_title, 200)
    assert [c["id"] for c in page["results"]] == ["c2", "c1"]
    assert [c["id"] for c in assert_json(searched, 200)["results"]] == ["c2"]
    # ISO 8601 date-times, as the schema says.
    assert datetime.datetime.fromisoformat(page["results"][0]["updated_at"]).tzinfo is not None
    # The project lists the browsable API and installed its templates.
    assert (browsable.status, browsable.content_type) == (200, "text/html; charset=utf-8")
    assert "Conversation List" in browsable.text
    # The project's authentication checks no CSRF; the API checks it.
    assert assert_json(forged, 403)["detail"].startswith("CSRF Failed")
    assert assert_json(anonymous, 403) == NO_CREDENTIALS  # UNAUTHENTICATED_USER None: no 500
    assert (schema_reply.status, schema_reply.content_type) == (200, "application/vnd.oai.openapi+json")
    schema = schema_reply.json()
    # The project's view has DRF's schema, which drf-spectacular can't read: left out.
    assert set(schema["paths"]) == API_PATHS | {"/api/schema/"}
    assert parameters(schema, "/api/conversations/{id}/messages/") == {"id", "page", "page_size"}
    assert_no_failure(served.stderr)


# -- with rest_framework installed (this process) ---------------------------------------------------


@pytest.fixture
def alice_client(django_user_model: Any) -> APIClient:
    client = APIClient()
    client.force_login(django_user_model.objects.create_user("alice"))
    return client


@pytest.mark.django_db
def test_with_rest_framework_installed_a_browser_gets_the_browsable_api(alice_client: APIClient) -> None:
    response = alice_client.get(reverse("uistream:conversation-list"), HTTP_ACCEPT=BROWSER_ACCEPT)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert b"Conversation List" in response.content
    # The page still offers the JSON.
    assert alice_client.get(reverse("uistream:conversation-list"), {"format": "json"}).json()["count"] == 0


@pytest.mark.django_db
def test_a_project_that_leaves_the_browsable_api_out_leaves_it_out_here(alice_client: APIClient) -> None:
    with override_settings(REST_FRAMEWORK={"DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]}):
        response = alice_client.get(reverse("uistream:conversation-list"), HTTP_ACCEPT=BROWSER_ACCEPT)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json()["count"] == 0
