import sys

import ember

app = ember.Server()


@app.get("/hello/{name}")
def hello(req):
    return {"hello": req.params["name"]}


app.run(int(sys.argv[1]) if len(sys.argv) > 1 else 8080)  # Ctrl+C stops it gracefully
