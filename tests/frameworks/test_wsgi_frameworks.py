"""Flask on Ember compared with gunicorn (sync workers), answer by answer."""
import pytest


@pytest.fixture(scope="module")
def flask(pair_factory):
    return pair_factory("flask_app:app", "wsgi")


def test_flask_json_and_paths(flask):
    assert flask.same("GET", "/").json() == {"code": 1, "msg": "Hello WebAPI"}
    assert flask.same("GET", "/path/a/b%20c/%C3%A4?x=1").json() == {"rest": "a/b c/ä", "full": "/path/a/b c/ä?x=1"}
    assert flask.same("POST", "/json", json={"k": [1, 2, "ü"]}).json()["got"] == {"k": [1, 2, "ü"]}


def test_flask_form_post(flask):
    r = flask.same("POST", "/form?page=2", data={"name": "Ada", "langs": ["py", "rs"]})
    assert r.json() == {"form": {"name": ["Ada"], "langs": ["py", "rs"]}, "args": {"page": "2"}}


def test_flask_file_upload(flask):
    blob = bytes(range(256)) * 4000
    files = {"doc": ("report.bin", blob, "application/octet-stream"), "txt": ("a.txt", b"hello", "text/plain")}
    r = flask.same("POST", "/upload", files=files, data={"note": "two files"})
    assert r.json() == {"files": {"doc": {"filename": "report.bin", "size": len(blob), "type": "application/octet-stream"},
                                  "txt": {"filename": "a.txt", "size": 5, "type": "text/plain"}},
                        "note": "two files"}


def test_flask_redirect_and_cookies(flask):
    r = flask.same("GET", "/go")
    assert r.status_code == 302 and r.headers["location"] == "/"
    r = flask.same("GET", "/cookies")
    assert r.text == "seen 0" and r.headers["set-cookie"].startswith("visits=1")
    assert flask.same("GET", "/cookies", headers={"cookie": "visits=4"}).text == "seen 4"


def test_flask_errors_and_the_server_keeps_serving(flask):
    assert flask.same("GET", "/missing").status_code == 404
    assert flask.same("DELETE", "/").status_code == 405
    assert flask.same("GET", "/crash").status_code == 500
    assert flask.same("GET", "/").status_code == 200
    flask.same("HEAD", "/", compare_body=False)
