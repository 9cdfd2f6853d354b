"""The Flask route of the Python WSGI benchmarks (bench/harness.py):

    python -m ember py_flask:app --interface wsgi   gunicorn -k sync py_flask:app   granian --interface wsgi py_flask:app

A plain Flask view building its JSON per request (the seeds' body, byte for byte).
"""
import json

from flask import Flask

app = Flask(__name__)


@app.get("/")
def hello():
    return app.response_class(json.dumps({"code": 1, "msg": "Hello WebAPI"}), mimetype="application/json")
