from django.conf import settings

from core.clean import limits


def app_settings(request) -> dict:
    return {"ALLOW_SIGNUP": settings.ALLOW_SIGNUP, **limits()}
