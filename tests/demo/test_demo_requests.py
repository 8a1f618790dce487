"""Bad requests to the real demo server: uploads (the page has no file input) and oversized bodies.

The app is built and served as ``sapbert demo`` serves it (:func:`spacy_sapbert.demo.app.launch`), over a
5-concept KB with the tiny random BERT, and spoken to with plain HTTP (``http.client``, so that
Content-Length and chunked bodies are exactly what each test says). Before the request guard,
``POST /gradio_api/upload`` stored any file in Gradio's upload folder and no body size was capped.
"""
from __future__ import annotations

import http.client
import json
import socket
import uuid
from pathlib import Path
from typing import Dict, Iterator, Optional, Set, Tuple
from urllib.parse import urlparse

import pytest

from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase

TIMEOUT_S = 120  # only bounds a hang (a server waiting for a body it should have refused); never asserted
CONCEPTS = [
    ("D009203", "Myocardial Infarction", ["Heart Attack"], "Disease"),
    ("D006973", "Hypertension", ["High Blood Pressure"], "Disease"),
    ("D006886", "Hydroxychloroquine", ["Plaquenil"], "Chemical"),
    ("D001241", "Aspirin", ["Acetylsalicylic Acid"], "Chemical"),
    ("D001249", "Asthma", ["Bronchial Asthma"], "Disease"),
]
TEXT = "After a heart attack she took aspirin; her hypertension was treated too."


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_bert) -> Iterator[Dict[str, object]]:
    from spacy_sapbert.demo.app import build_app, launch
    from spacy_sapbert.demo.resources import build_pipeline

    kb = KnowledgeBase((Concept(cid, name, aliases, [kind]) for cid, name, aliases, kind in CONCEPTS),
                       name="mini")
    kb_file = kb.to_jsonl(tmp_path_factory.mktemp("demo-requests-kb") / "mini.jsonl")
    resources = build_pipeline(str(tiny_bert), kb_file, device="cpu", show_progress=False)
    app = build_app(resources)
    _, url, _ = launch(app, port=_free_port(), block=False)
    parsed = urlparse(url)
    yield {"host": parsed.hostname, "port": parsed.port, "upload_dir": Path(app.server_app.uploaded_file_dir)}
    app.close()


def _connect(server) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(server["host"], server["port"], timeout=TIMEOUT_S)


def _request(server, method: str, path: str, body: Optional[bytes] = None,
             headers: Optional[Dict[str, str]] = None, chunked: bool = False) -> Tuple[int, str]:
    conn = _connect(server)
    try:
        if chunked:  # no Content-Length: http.client sends the pieces as chunks
            pieces = [body[i:i + 8192] for i in range(0, len(body or b""), 8192)]
            conn.request(method, path, body=iter(pieces), headers=headers or {}, encode_chunked=True)
        else:
            conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def _multipart(name: str, content: bytes) -> Tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def _files(folder: Path) -> Set[Path]:
    return set(folder.rglob("*")) if folder.exists() else set()


def _link_call(text: str) -> bytes:
    return json.dumps({"data": [text, 0.5, 3]}, ensure_ascii=True).encode("ascii")


def _result(server, event_id: str) -> str:
    """The SSE stream of a /gradio_api/call/link event, read to its end."""
    status, body = _request(server, "GET", f"/gradio_api/call/link/{event_id}")
    assert status == 200, body
    return body


@pytest.mark.parametrize("path", ["/gradio_api/upload", "/gradio_api/upload/", "/gradio_api/upload?upload_id=x1",
                                  "/behind/a/proxy/gradio_api/upload", "/gradio_api/process_recording"])
def test_upload_is_refused_and_stores_nothing(server, path):
    token = uuid.uuid4().hex
    name, marker = f"payload-{token}.txt", f"not for this demo {token}".encode()
    body, content_type = _multipart(name, marker * 100)
    before = _files(server["upload_dir"])
    status, text = _request(server, "POST", path, body, {"Content-Type": content_type})
    assert status == 403, text
    assert "Uploads are disabled" in text
    # Gradio keeps the file's name (<upload folder>/<hash>/payload-….txt); other servers on this machine
    # may add files of their own meanwhile, so look for this upload's name or content only
    new = [p for p in _files(server["upload_dir"]) - before if p.is_file()]
    leaked = [p for p in new if p.name == name or (p.stat().st_size < 1 << 20 and marker in p.read_bytes())]
    assert not leaked, f"the refused upload was stored as {leaked}"


def test_multipart_body_is_refused_on_any_route(server):
    body, content_type = _multipart("payload.txt", b"x" * 1000)
    status, text = _request(server, "POST", "/gradio_api/component_server", body, {"Content-Type": content_type})
    assert status == 415, text


def test_body_over_the_cap_is_refused_from_its_content_length(server):
    """Refused from the header alone: no body is sent, so a server that waited for it would never answer."""
    from spacy_sapbert.demo.request_guard import MAX_REQUEST_BYTES

    conn = _connect(server)
    try:
        conn.putrequest("POST", "/gradio_api/call/link")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(MAX_REQUEST_BYTES + 1))
        conn.endheaders()
        response = conn.getresponse()
        status, text = response.status, response.read().decode()
    finally:
        conn.close()
    assert status == 413, text
    assert f"{MAX_REQUEST_BYTES:,} bytes" in text


def test_chunked_body_over_the_cap_is_refused(server):
    from spacy_sapbert.demo.request_guard import MAX_REQUEST_BYTES

    body = _link_call("heart attack " * (MAX_REQUEST_BYTES // 13 + 1))
    assert len(body) > MAX_REQUEST_BYTES
    status, text = _request(server, "POST", "/gradio_api/call/link", body,
                            {"Content-Type": "application/json"}, chunked=True)
    assert status == 413, text
    # the same body with its Content-Length
    status, text = _request(server, "POST", "/gradio_api/call/link", body, {"Content-Type": "application/json"})
    assert status == 413, text


@pytest.mark.parametrize("chunked", [False, True])
def test_a_link_call_still_works(server, chunked):
    status, text = _request(server, "POST", "/gradio_api/call/link", _link_call(TEXT),
                            {"Content-Type": "application/json"}, chunked=chunked)
    assert status == 200, text
    result = _result(server, json.loads(text)["event_id"])
    assert "event: complete" in result and "**3** mention(s) found" in result, result


def test_the_largest_text_the_page_sends_is_under_the_cap(server):
    """5,000 characters that each take 6 bytes in JSON (the worst case the cap was sized for) get through."""
    from spacy_sapbert.demo.inputs import MAX_TEXT_CHARS
    from spacy_sapbert.demo.request_guard import MAX_REQUEST_BYTES, WORST_LEGITIMATE_BYTES

    body = _link_call("\u00e9" * MAX_TEXT_CHARS)
    assert len(body) <= WORST_LEGITIMATE_BYTES and 3 * WORST_LEGITIMATE_BYTES <= MAX_REQUEST_BYTES
    status, text = _request(server, "POST", "/gradio_api/call/link", body, {"Content-Type": "application/json"})
    assert status == 200, text
    assert "event: complete" in _result(server, json.loads(text)["event_id"])


def test_the_page_is_still_served(server):
    status, text = _request(server, "GET", "/")
    assert status == 200
    assert "spacy-sapbert demo" in text
