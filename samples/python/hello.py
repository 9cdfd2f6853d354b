import ember

app = ember.Server()


@app.get("/hello/{name}")
def hello(req):
    return {"hello": req.params["name"]}


app.run(8080)  # Ctrl+C stops it gracefully
