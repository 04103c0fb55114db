from django.conf import settings
from django.utils.functional import SimpleLazyObject

from chat import preferences
from core.clean import limits


def app_settings(request) -> dict:
    return {
        "ALLOW_SIGNUP": settings.ALLOW_SIGNUP,
        **limits(),
        # The person's theme (templates/base.html): read only by a page drawn whole, never by
        # the fragments htmx swaps in.
        "theme": SimpleLazyObject(lambda: preferences.theme_of(preferences.stored(request.user))),
    }
