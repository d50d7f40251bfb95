"""The login page with attempt limits (issue 10 item 11): a locked-out login answers 429."""

from __future__ import annotations

import math
import time
from typing import Any

from django.contrib.auth import views as auth_views
from django.http import HttpResponse

from reviewapp.forms import LimitedAuthenticationForm


class LoginView(auth_views.LoginView):
    authentication_form = LimitedAuthenticationForm

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        if getattr(form, "locked", False):
            from reviewapp.services.limits import client_ip, login_locked_until

            until = login_locked_until(username=str(form.data.get("username") or ""),
                                       ip=client_ip(self.request))
            response.status_code = 429
            if until is not None:
                response["Retry-After"] = str(max(1, math.ceil(until - time.time())))
        return response
