"""A small SMTP sink for tests: it takes mail from Django's real SMTP backend and keeps, for each message, the
envelope recipients (RCPT TO: where the mail really goes) and the message text. Plain SMTP, no extensions."""

from __future__ import annotations

import socketserver
import threading
from dataclasses import dataclass


@dataclass
class Received:
    recipients: list[str]
    data: str


class SmtpSink:
    def __init__(self) -> None:
        self.messages: list[Received] = []
        sink = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                sink._converse(self.rfile, self.wfile)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _converse(self, rfile, wfile) -> None:
        recipients: list[str] = []
        wfile.write(b"220 sink ready\r\n")
        while line := rfile.readline():
            verb = line[:4].upper()
            if verb == b"QUIT":
                wfile.write(b"221 bye\r\n")
                return
            if verb == b"RCPT":
                recipients.append(line.decode("utf-8").split(":", 1)[1].strip().strip("<>"))
            if verb == b"DATA":
                wfile.write(b"354 end with <CRLF>.<CRLF>\r\n")
                body = b"".join(iter(rfile.readline, b".\r\n"))
                self.messages.append(Received(recipients, body.decode("utf-8", "replace")))
                recipients = []
            wfile.write(b"250 OK\r\n")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
