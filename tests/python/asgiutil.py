"""What the ASGI server tests share: reading a whole request body and sending a text answer.
The asgi fixture that starts a server is in conftest.py."""


async def read_body(receive):
    """The whole request body, however many http.request events it comes in."""
    parts = []
    while True:
        message = await receive()
        assert message["type"] == "http.request", message
        parts.append(message["body"])
        if not message.get("more_body"):
            return b"".join(parts)


async def send_text(send, body, status=200, headers=()):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain")] + list(headers)})
    await send({"type": "http.response.body", "body": body})

