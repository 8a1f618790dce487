"""What the demo's server refuses before Gradio sees a request: uploads and oversized bodies.

Why: Gradio serves ``POST /gradio_api/upload`` (and ``/process_recording``, which also writes the
body to its temp folder) for every app, with no size limit unless ``max_file_size`` is set, so
anyone who can reach the demo could store files of any size under ``GRADIO_TEMP_DIR`` (``/tmp/gradio``)
although the page has no file input. :class:`RequestGuard` is a pure ASGI middleware that

- refuses every upload route (403), under any root path, and any multipart body (415): the page
  sends JSON only;
- refuses any request body over :data:`MAX_REQUEST_BYTES` (413): at once when ``Content-Length``
  says so, and for a body without one (chunked) as soon as the bytes received pass the cap, which
  are counted as they arrive and never buffered.

:func:`demo.app.launch` installs it and also passes Gradio's own ``max_file_size``, a second line
of defence should an upload route ever get past it.
"""
from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Dict, MutableMapping

from .inputs import MAX_TEXT_CHARS

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# The largest body the page sends is a Link-text call: at most MAX_TEXT_CHARS characters, each at
# most 6 bytes in JSON (\uXXXX), plus under 1 kB of event fields: about 31 kB. 4x that, rounded up.
WORST_LEGITIMATE_BYTES = 6 * MAX_TEXT_CHARS + 1024
MAX_REQUEST_BYTES = 128 * 1024
# Gradio routes that store what they receive; the last path segment, whatever the root path.
UPLOAD_ROUTES = frozenset({"upload", "upload_progress", "process_recording"})


class _BodyTooLarge(Exception):
    """Raised into the app when a body without Content-Length passes the cap."""


async def _refuse(send: Send, status: int, reason: str) -> None:
    body = (reason + "\n").encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode("ascii"))]})
    await send({"type": "http.response.body", "body": body})


def _headers(scope: Scope) -> Dict[bytes, bytes]:
    return {name.lower(): value for name, value in scope.get("headers", [])}


class RequestGuard:
    """ASGI middleware: no uploads, no multipart bodies, no body over ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        segments = [s for s in path.split("/") if s]
        if segments and segments[-1] in UPLOAD_ROUTES:
            logger.info("refused %s %s: uploads are disabled", scope.get("method"), path)
            await _refuse(send, 403, "Uploads are disabled: this demo has no file input.")
            return
        headers = _headers(scope)
        if headers.get(b"content-type", b"").lower().startswith(b"multipart/"):
            logger.info("refused a multipart body to %s", path)
            await _refuse(send, 415, "This demo accepts JSON requests only.")
            return
        length = headers.get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await _refuse(send, 400, "Invalid Content-Length.")
                return
            if declared > self.max_bytes:
                logger.info("refused a %d-byte body to %s", declared, path)
                await _refuse(send, 413, f"Request body too large: the demo accepts at most {self.max_bytes:,} bytes.")
                return
        await self._capped(scope, receive, send)

    async def _capped(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app, counting body bytes; past the cap, drop the app's reply and answer 413."""
        state = {"received": 0, "too_large": False, "started": False}

        async def counting_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > self.max_bytes:
                    state["too_large"] = True
                    raise _BodyTooLarge()
            return message

        async def checked_send(message: Message) -> None:
            if state["too_large"]:
                return  # the app's reply to a body it never got in full (e.g. FastAPI's 400)
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, counting_receive, checked_send)
        except Exception:
            if not state["too_large"]:
                raise
        if state["too_large"] and not state["started"]:
            logger.info("refused a body over %d bytes (no Content-Length) to %s", self.max_bytes, scope.get("path"))
            await _refuse(send, 413, f"Request body too large: the demo accepts at most {self.max_bytes:,} bytes.")
