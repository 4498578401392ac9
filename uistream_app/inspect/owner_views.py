"""Who owns a conversation, as the admin shows it: one function for the
conversation list and page, the run list and a run's page.

A user is named as ``Owner.describe`` names them and linked to their
admin page (where the user model has one); an anonymous visitor is
"anonymous visitor" and the fingerprint of the session key
(``Owner.session_digest``). The key itself is never shown: it is a
credential, and whoever has it is the visitor.
"""

from __future__ import annotations

from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from ..models import Conversation
from ..owners import Owner

__all__ = ["owner_html", "owner_url"]


def owner_url(owner: Owner, site_name: str = "admin") -> str | None:
    """The admin page of ``owner``'s user (None: a visitor, or a user model
    the admin site ``site_name`` does not register)."""
    user = owner.user
    if user is None:
        return None
    opts = user._meta
    try:
        return reverse(f"{site_name}:{opts.app_label}_{opts.model_name}_change", args=[user.pk])
    except NoReverseMatch:
        return None


def owner_html(conversation: Conversation, site_name: str = "admin") -> SafeString:
    """The owner of ``conversation`` (its ``owner`` selected with it), escaped,
    linked when it is a user the admin has a page for."""
    owner = Owner.of_conversation(conversation)
    if not owner.is_known:
        return format_html('<span class="uistream-owner">{}</span>', _("nobody"))
    url = owner_url(owner, site_name)
    if url is None:
        kind = "user" if owner.is_user else "visitor"
        return format_html('<span class="uistream-owner uistream-owner-{}">{}</span>', kind, owner.describe())
    return format_html('<a class="uistream-owner uistream-owner-user" href="{}">{}</a>', url, owner.describe())
