"""A real SMTP server for the tests (aiosmtpd): every message it accepts is written,
whole, as one file in OUT_DIR (written aside, then renamed, so a reader never sees half
of one). Recipients at the domain `refused.test` are refused for good (550), as a
server refuses an address it will not deliver to.

    python3 smtp_sink.py PORT OUT_DIR
"""

import os
import sys
import threading
import time

from aiosmtpd.controller import Controller


class Sink:
    def __init__(self, out):
        self.out = out
        self.count = 0
        self.lock = threading.Lock()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.lower().endswith("@refused.test"):
            return "550 5.1.1 <%s>: Recipient address rejected" % address
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.count += 1
            n = self.count
        name = os.path.join(self.out, "%d-%d-%d.eml" % (time.time_ns(), os.getpid(), n))
        with open(name + ".part", "wb") as f:
            f.write(envelope.original_content or envelope.content)
        os.rename(name + ".part", name)
        return "250 Message accepted for delivery"


def main():
    port = int(sys.argv[1])
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    controller = Controller(Sink(out), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        while True:
            time.sleep(3600)
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
