from django.contrib import admin
from django.urls import include, path

from web.views.accounts import LimitedAdminLoginForm, LimitedLoginView, LimitedPasswordResetView

admin.site.login_form = LimitedAdminLoginForm

urlpatterns = [
    path("admin/", admin.site.urls),
    # Before Django's own: the same view, counting failed attempts and giving the browser a
    # device cookie (web/views/accounts.py).
    path("accounts/login/", LimitedLoginView.as_view(), name="login"),
    path("accounts/password_reset/", LimitedPasswordResetView.as_view(), name="password_reset"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("web.urls")),
]
