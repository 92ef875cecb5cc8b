"""The rehearsal's stand-in for vLLM's OpenAI-compatible server: one local model, greedy, through the project's own
generation path (workload/measure/samples.py: the same model class, dtype and chat template as the before-and-after
samples). Runs inside the MaxText venv (transformers, torch), standard library HTTP on loopback:

    python -m workload.eval.chat_server MODEL_DIR --name NAME --port PORT

It answers what lm-eval's `local-chat-completions` asks (lm_eval/models/openai_completions.py, 0.4.13):
`GET /v1/models`, and `POST /v1/chat/completions` with `messages`, `max_tokens`, `temperature` and `stop`; the
answer is `choices[0].message.content`, cut before the first stop string, as vLLM's is. Rules it does not enforce
of vLLM's: a prompt longer than the model's context is not refused (the tiny model's fixture prompts are short);
`seed` is ignored (greedy needs none). A temperature above 0 is refused: the stand-in samples nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from workload.measure import samples


class Model:
    """One model and its tokenizer; one generation at a time (torch's CPU generate is not re-entrant)."""

    def __init__(self, model_dir: str):
        import torch
        from transformers import AutoTokenizer

        # One thread: the tiny model's generate took 0.3 s for 16 tokens on one thread and 2-5 s on two of a loaded
        # 2-core machine, where the threads wait on each other.
        torch.set_num_threads(1)
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = samples.load_model(model_dir)
        self.lock = threading.Lock()

    def complete(self, messages: list[dict[str, str]], max_tokens: int, stop: list[str]) -> tuple[str, str, int, int]:
        """The answer text, why it ended (`stop` or `length`), the prompt's and the answer's token counts."""
        import torch

        (encoded,) = samples.chat_inputs_of(self.tokenizer, [messages])
        with self.lock, torch.no_grad():
            ids = self.model.generate(**encoded, max_new_tokens=max_tokens, do_sample=False)
        prompt = encoded["input_ids"].shape[1]
        new = ids[0, prompt:].tolist()
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        cuts = [text.index(s) for s in stop if s and s in text]
        ended_early = len(new) < max_tokens or bool(cuts)
        return (text[: min(cuts)] if cuts else text), ("stop" if ended_early else "length"), prompt, len(new)


def handler(model: Model, name: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  the base class's name
            sys.stderr.write(f"chat_server: {format % args}\n")

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refuse(self, status: int, message: str) -> None:
            self._reply(status, {"error": {"message": message, "type": "invalid_request_error"}})

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._reply(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
            else:
                self._refuse(404, f"no route {self.path}")

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._refuse(404, f"no route {self.path}")
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                messages, max_tokens = body["messages"], int(body.get("max_tokens") or 16)
                stop = body.get("stop") or []
                stop = [stop] if isinstance(stop, str) else list(stop)
            except (ValueError, KeyError, TypeError) as error:
                return self._refuse(400, f"bad request: {error}")
            if body.get("model") != name:
                return self._refuse(404, f"the model {body.get('model')!r} does not exist; this serves {name!r}")
            if float(body.get("temperature") or 0) > 0:
                return self._refuse(400, "this stand-in generates greedily only: send temperature 0")
            text, reason, prompt, answer = model.complete(messages, max_tokens, stop)
            self._reply(
                200,
                {
                    "object": "chat.completion",
                    "model": name,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": reason}
                    ],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": answer, "total_tokens": prompt + answer},
                },
            )

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workload.eval.chat_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("--name", required=True, help="the model name requests must give")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    model = Model(args.model_dir)  # loaded before the port opens: answering /v1/models means ready
    server = ThreadingHTTPServer((args.host, args.port), handler(model, args.name))
    print(f"chat_server: serving {args.model_dir} as {args.name} on {args.host}:{args.port}", file=sys.stderr)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
