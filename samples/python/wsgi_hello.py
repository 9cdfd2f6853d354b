"""A plain WSGI app (no framework) for Ember's WSGI server:

    python -m ember wsgi_hello:app --app-dir samples/python --port 8000

GET /        -> {"hello": "wsgi", "path": ...}
POST /echo   -> the request body back, with its Content-Type
"""
import json


def app(environ, start_response):
    if environ["PATH_INFO"] == "/echo":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        ctype = environ.get("CONTENT_TYPE", "application/octet-stream")
    else:
        body = json.dumps({"hello": "wsgi", "path": environ["PATH_INFO"]}).encode()
        ctype = "application/json"
    start_response("200 OK", [("Content-Type", ctype)])
    return [body]
