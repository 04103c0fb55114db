from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.urls import include, path

from web.views.accounts import LimitedAdminLoginForm, LimitedLoginForm, LimitedPasswordResetView

admin.site.login_form = LimitedAdminLoginForm

urlpatterns = [
    path("admin/", admin.site.urls),
    # Before Django's own: the same view, counting failed attempts (web/views/accounts.py).
    path("accounts/login/", LoginView.as_view(authentication_form=LimitedLoginForm), name="login"),
    path("accounts/password_reset/", LimitedPasswordResetView.as_view(), name="password_reset"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("web.urls")),
]
