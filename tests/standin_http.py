"""What the tests' HTTP stand-ins of Google's and the Hub's APIs share: an answer with its length and type."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


def reply(handler: BaseHTTPRequestHandler, code: int, data: bytes, content_type: str) -> None:
    handler.send_response(code)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def reply_json(handler: BaseHTTPRequestHandler, code: int, body: object) -> None:
    reply(handler, code, json.dumps(body).encode(), "application/json")
