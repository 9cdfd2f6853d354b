"""A minimal Django project on Ember (WSGI and ASGI), compared with gunicorn and uvicorn:
a view, a form with CSRF, static files through WhiteNoise."""
import re

import pytest


@pytest.fixture(scope="module", params=["wsgi", "asgi"])
def django(request, pair_factory):
    return pair_factory("djsite.%s:application" % request.param, request.param)


def test_django_view(django):
    assert django.same("GET", "/").json() == {"code": 1, "msg": "Hello WebAPI"}
    r = django.same("GET", "/hello/w%C3%B6rld?q=1")
    assert r.json() == {"hello": "wörld", "path": "/hello/wörld", "q": "1", "script": ""}
    assert django.same("GET", "/nope").status_code == 404
    assert django.same("GET", "/crash").status_code == 500
    assert django.same("GET", "/").status_code == 200


def _csrf_flow(client):
    page = client.get("/form")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    cookie = client.cookies.get("csrftoken")
    ok = client.post("/form", data={"name": "ada", "csrfmiddlewaretoken": token},
                     headers={"Referer": str(client.base_url) + "/form"})
    client.cookies.clear()
    missing = client.post("/form", data={"name": "ada"})
    client.cookies.set("csrftoken", cookie)
    bad = client.post("/form", data={"name": "ada", "csrfmiddlewaretoken": "x" * 64})
    client.cookies.clear()
    return (page.status_code, bool(token), bool(cookie), ok.status_code, ok.headers.get("location"),
            missing.status_code, bad.status_code)


def test_django_form_with_csrf(django):
    ember, ref = _csrf_flow(django.a), _csrf_flow(django.b)
    assert ember == ref == (200, True, True, 302, "/hello/ada", 403, 403)


def test_django_static_files_through_whitenoise(django):
    r = django.same("GET", "/static/app.css")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/css")
    assert b"served by WhiteNoise through Ember" in r.content
    etag = r.headers.get("etag")
    if etag:
        assert django.same("GET", "/static/app.css", headers={"If-None-Match": etag}).status_code == 304
    assert django.same("GET", "/static/missing.css").status_code == 404
    assert django.same("HEAD", "/static/app.css", compare_body=False).content == b""
