"""An OpenAI Chat Completions server for benchmarks on loopback: each answer is one
streamed turn, a `read_file` call of README.md when the last message is the user's,
else the text "Done.". Used by benches/bridge_load.py and hosts/cli/link/order.py."""
import http.server
import json
import socketserver
import threading


class Provider(http.server.BaseHTTPRequestHandler):
    """Chat Completions: a tool call when the last message is the user's, else text."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        last = body["messages"][-1]["role"]
        if last == "user":
            delta = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                     "function": {"name": "read_file",
                                                  "arguments": "{\"path\":\"README.md\"}"}}]}
            finish = "tool_calls"
        else:
            delta = {"content": "Done."}
            finish = "stop"
        chunks = [
            {"choices": [{"index": 0, "delta": dict(delta, role="assistant")}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
             "usage": {"prompt_tokens": 100, "completion_tokens": 10}},
        ]
        out = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
        out += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def start():
    """Starts a server on a free loopback port; returns its `/v1` base URL."""
    server = Server(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"
