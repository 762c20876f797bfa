"""An OTLP/HTTP receiver of a server's spans, in its own threads, around a sweep.

    POST <any path> (vLLM's exporter posts to the endpoint URL as given; collectors use
    /v1/traces), Content-Type application/x-protobuf, optionally Content-Encoding gzip
      -> 200 with an empty ExportTraceServiceResponse; the spans go to the SpanStore
    anything else (OTLP JSON, a body that is not OTLP) -> 400 / 415, counted and kept as
    the store's last_error, so a level that joined nothing can say why.

An OTLP *gRPC* exporter (vLLM's default: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL unset) opens
with the HTTP/2 preface; the receiver counts that too (grpc_attempts) and closes the
connection, so the result can name the fix (set it to http/protobuf).

`--server-traces [HOST:]PORT`: HOST defaults to 127.0.0.1 (loopback: nothing outside the
machine can post spans unless asked to).
"""

from __future__ import annotations

import gzip
import socket
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from perfkit.errors import PerfkitError
from perfkit.traces import otlp
from perfkit.traces.store import SpanStore

DEFAULT_HOST = "127.0.0.1"
MAX_BODY = 64 << 20  # bytes; an OTLP exporter batches at most 512 spans (a few hundred KB)
HTTP2_PREFACE = b"PRI * HTTP/2.0"
PROTOBUF = otlp.PROTOBUF_TYPE


def parse_address(text: str, option: str = "--server-traces") -> tuple[str, int]:
    """[HOST:]PORT -> (host, port); PerfkitError naming the option otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") if sep else DEFAULT_HOST
    if not port.isdigit() or not 0 < int(port) < 65536 or (sep and not host):
        raise PerfkitError(f"{option}: expected [HOST:]PORT like 4318 or 127.0.0.1:4318, "
                           f"got {text!r}")
    return host, int(port)


def _unpack(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    if encoding not in ("", "identity"):
        raise ValueError(f"unsupported Content-Encoding {encoding!r}")
    return body


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive: exporters reuse their connection

    def parse_request(self) -> bool:
        if getattr(self, "raw_requestline", b"").startswith(HTTP2_PREFACE):
            self.server.store.refused("an OTLP gRPC exporter connected (HTTP/2)", grpc=True)
            self.close_connection = True
            return False
        return super().parse_request()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._refuse(413, f"an export of {length} bytes (limit {MAX_BODY})")
            return
        body = self.rfile.read(length)
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if kind != PROTOBUF:
            self._refuse(415, f"Content-Type {kind or 'none'} (OTLP JSON?); perfkit reads "
                         f"{PROTOBUF} (OTLP/HTTP protobuf)")
            return
        try:
            spans = otlp.decode(_unpack(body, (self.headers.get("Content-Encoding") or "")
                                        .strip().lower()))
        except (ValueError, OSError, EOFError, zlib.error) as err:
            self._refuse(400, str(err))
            return
        self.server.store.add(spans)
        self._send(200, otlp.empty_response(), PROTOBUF)

    def _refuse(self, status: int, reason: str) -> None:
        self.server.store.refused(reason)
        self._send(status, reason.encode(), "text/plain")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: the store counts what went wrong


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], store: SpanStore) -> None:
        self.store = store
        if ":" in address[0]:  # an IPv6 host: [::1]:4318
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)


class Receiver:
    """Listening from start() to stop(); spans land in `store`."""

    def __init__(self, host: str, port: int, store: SpanStore | None = None) -> None:
        self.store = store or SpanStore()
        try:
            self._server = _Server((host, port), self.store)
        except OSError as err:
            raise PerfkitError(f"--server-traces: cannot listen on {host}:{port}: "
                               f"{err.strerror or err}") from None
        self.host, self.port = host, int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="perfkit-otlp-receiver", daemon=True)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()
