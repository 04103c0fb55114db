from django.conf import settings


def app_settings(request) -> dict:
    return {"ALLOW_SIGNUP": settings.ALLOW_SIGNUP, "MAX_MESSAGE_CHARS": settings.MAX_MESSAGE_CHARS}
