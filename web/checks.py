"""Start-up checks (Django's system checks, shown by `migrate` when `make serve` starts)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Warning, register
from django.urls import NoReverseMatch, reverse


@register()
def mail_for_password_reset(app_configs=None, **kwargs) -> list[Warning]:
    """Password reset is on (its page is routed) but no mail server is named, with debug off:
    a reset would answer that a mail was sent while none can be."""
    if settings.DEBUG or settings.MAIL_CONFIGURED:
        return []
    try:
        reverse("password_reset")
    except NoReverseMatch:
        return []
    return [
        Warning(
            "Password reset is on but no mail server is configured: resets answer that a mail "
            "was sent and none can be.",
            hint="Set EMAIL_HOST (with EMAIL_PORT, EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, "
            "EMAIL_USE_TLS or EMAIL_USE_SSL, DEFAULT_FROM_EMAIL): docs/production.md, Mail.",
            id="web.W001",
        )
    ]
