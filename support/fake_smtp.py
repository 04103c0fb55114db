"""A mail server that keeps what it is sent: enough SMTP (greeting, EHLO, MAIL, RCPT, DATA,
QUIT) for Django's SMTP backend, on a port of its own, in a thread."""

from __future__ import annotations

import socketserver
import threading

from support.servers import HOST, free_port


class FakeSMTP:
    def __init__(self) -> None:
        self.port = free_port()
        self.mails: list[dict] = []  # {"from", "to", "data"} each
        keep = self.mails

        class Session(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                mail: dict = {"to": []}
                self.wfile.write(b"220 fake-smtp ready\r\n")
                for line in self.rfile:
                    command = line.decode("latin-1").strip()
                    verb = command[:4].upper()
                    if verb in ("EHLO", "HELO"):
                        self.wfile.write(b"250 fake-smtp\r\n")
                    elif verb == "MAIL":
                        mail = {"from": command[10:].strip("<>"), "to": []}
                        self.wfile.write(b"250 OK\r\n")
                    elif verb == "RCPT":
                        mail["to"].append(command[8:].strip("<>"))
                        self.wfile.write(b"250 OK\r\n")
                    elif verb == "DATA":
                        self.wfile.write(b"354 go on\r\n")
                        body = []
                        for data in self.rfile:
                            if data in (b".\r\n", b".\n"):
                                break
                            body.append(data.decode("utf-8", "replace"))
                        keep.append(mail | {"data": "".join(body)})
                        self.wfile.write(b"250 kept\r\n")
                    elif verb == "QUIT":
                        self.wfile.write(b"221 bye\r\n")
                        return
                    else:  # RSET, NOOP
                        self.wfile.write(b"250 OK\r\n")

        self.server = socketserver.ThreadingTCPServer((HOST, self.port), Session)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeSMTP:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
