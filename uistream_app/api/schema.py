"""``schema/``: the OpenAPI schema of the API (drf-spectacular), whatever
the project's DRF settings, with ``drf_spectacular`` in ``INSTALLED_APPS``
or not (its ``SPECTACULAR_SETTINGS`` apply either way; only its
``spectacular`` command, system check and Swagger pages need it installed).

The schema lists the app's views and those of the project's DRF views that
drf-spectacular can describe (``SpectacularEndpoints``), and describes the
app's own ``DjangoSessionAuthentication`` (``DjangoSessionScheme``), so a
project that makes that class DRF's default gets no warning per view.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.generators import EndpointEnumerator as SpectacularEndpointEnumerator
from drf_spectacular.generators import SchemaGenerator as SpectacularSchemaGenerator
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SCHEMA_KWARGS, SpectacularAPIView
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from .permissions import SchemaAccess

__all__ = ["DjangoSessionScheme", "SchemaGenerator", "SchemaView", "SpectacularEndpoints"]


# (drf-spectacular's registering ``__init_subclass__`` has no annotations.)
class DjangoSessionScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """``policies.DjangoSessionAuthentication`` in the schema: Django's
    session cookie, as drf-spectacular describes DRF's
    ``SessionAuthentication`` (the same scheme, under the same name).
    Without it, a project that makes the class DRF's default gets a warning
    for every view, at every schema request."""

    target_class = "uistream_app.policies.DjangoSessionAuthentication"
    name = "cookieAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, str]:
        return {"type": "apiKey", "in": "cookie", "name": django_settings.SESSION_COOKIE_NAME}


class SpectacularEndpoints(SpectacularEndpointEnumerator):
    """The endpoints drf-spectacular can describe: a DRF view whose schema
    is drf-spectacular's. A project's own DRF views are in the schema when
    the project made drf-spectacular's ``AutoSchema`` theirs (its
    ``DEFAULT_SCHEMA_CLASS``); with DRF's they are left out, where
    drf-spectacular would fail the whole schema on them."""

    def should_include_endpoint(self, path: str, callback: Any) -> bool:
        if not super().should_include_endpoint(path, callback):
            return False
        return isinstance(callback.initkwargs.get("schema", callback.cls.schema), AutoSchema)


class SchemaGenerator(SpectacularSchemaGenerator):
    endpoint_inspector_cls = SpectacularEndpoints


# ``@extend_schema`` on the class, not on ``get``: on a method it builds
# on the project's ``DEFAULT_SCHEMA_CLASS`` (``base_views``). The docstring
# is the schema's description of the view, so the notes are here.
@extend_schema(**SCHEMA_KWARGS)
class SchemaView(SpectacularAPIView):
    """The OpenAPI schema, for staff unless ``UISTREAM["SCHEMA_PUBLIC"]``
    (``permissions.SchemaAccess``)."""

    permission_classes = (SchemaAccess,)
    generator_class = SchemaGenerator
    # What drf-spectacular's view leaves to DRF's settings, pinned as on
    # every API view (``base_views.BaseAPIView``; its renderers are
    # drf-spectacular's, YAML and JSON, and it parses nothing).
    schema = AutoSchema()
    versioning_class = None

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # drf-spectacular's own ``get`` carries a method ``@extend_schema``
        # built on the ``DEFAULT_SCHEMA_CLASS`` of the moment it was
        # imported; this one is described by the class's.
        response: Response = super().get(request, *args, **kwargs)  # type: ignore[no-untyped-call]
        return response

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        # The schema's own renderers (YAML by default) would write DRF's
        # error detail out as an object; an error is JSON, as in the rest
        # of the API.
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return response
