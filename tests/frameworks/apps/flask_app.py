"""Flask test app: form post, file upload, redirect, cookies, JSON, errors."""
from flask import Flask, jsonify, make_response, redirect, request, url_for

app = Flask(__name__)


@app.get("/")
def index():
    return jsonify(code=1, msg="Hello WebAPI")


@app.post("/form")
def form():
    return jsonify(form=request.form.to_dict(flat=False), args=request.args.to_dict())


@app.post("/upload")
def upload():
    files = {name: {"filename": f.filename, "size": len(f.read()), "type": f.mimetype}
             for name, f in request.files.items()}
    return jsonify(files=files, note=request.form.get("note"))


@app.get("/go")
def go():
    return redirect(url_for("index"))


@app.get("/cookies")
def cookies():
    r = make_response(f"seen {request.cookies.get('visits', '0')}")
    r.set_cookie("visits", str(int(request.cookies.get("visits", "0")) + 1), samesite="Lax")
    return r


@app.post("/json")
def json_echo():
    data = request.get_json()
    return jsonify(got=data, path=request.path, script=request.script_root)


@app.get("/path/<path:rest>")
def path(rest):
    return jsonify(rest=rest, full=request.full_path)


@app.get("/crash")
def crash():
    raise RuntimeError("boom")
