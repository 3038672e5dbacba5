"""Drives a headless Chromium through the Chrome DevTools Protocol with the
Python standard library only (Debian's /usr/bin/python3 has no WebSocket
module): starts the browser, opens a page, evaluates expressions in it,
moves and clicks the mouse, waits for the events it reports (a request
held on its way, for one), and takes screenshots. Also reads a PNG's
pixels, to tell a screenshot that shows something from a blank one.
Used by tests/dashboard_check.py; not a test itself."""

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
import zlib


class WebSocket:
    """A WebSocket client (RFC 6455) for text messages."""

    def __init__(self, url, timeout=30):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        if m is None:
            raise ValueError("not a ws:// address: " + url)
        host, port, path = m.group(1), int(m.group(2)), m.group(3)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((
            "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n" % (path, host, port, key)
        ).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the browser closed the handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError("no WebSocket: " + head.decode(errors="replace"))

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the browser closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        data = text.encode()
        head = bytearray([0x81])  # FIN, text
        if len(data) < 126:
            head.append(0x80 | len(data))
        elif len(data) < 65536:
            head.append(0x80 | 126)
            head += struct.pack(">H", len(data))
        else:
            head.append(0x80 | 127)
            head += struct.pack(">Q", len(data))
        mask = os.urandom(4)
        head += mask
        self.sock.sendall(bytes(head) + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 8:
                raise ConnectionError("the browser closed the WebSocket")
            if opcode in (0, 1, 2):
                message += payload
                if b0 & 0x80:
                    return message.decode()

    def close(self):
        self.sock.close()


class Browser:
    """A headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, binary="chromium", width=1280, height=800):
        self.profile = tempfile.mkdtemp(prefix="dashboard_check.")
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check",
             "--disable-background-networking", "--disable-component-update",
             "--disable-extensions", "--hide-scrollbars",
             "--user-data-dir=" + self.profile, "--remote-debugging-port=0",
             "--window-size=%d,%d" % (width, height), "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port = self._devtools_port()
        self.ws = None
        for target in json.load(urllib.request.urlopen(
                "http://127.0.0.1:%d/json/list" % port, timeout=30)):
            if target.get("type") == "page":
                self.ws = WebSocket(target["webSocketDebuggerUrl"])
                break
        if self.ws is None:
            raise RuntimeError("the browser has no page")
        self.next_id = 0
        self.events = []  # what the page reported, in order
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _devtools_port(self):
        deadline = time.time() + 60
        seen = b""
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            seen += line
            m = re.search(rb"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                return int(m.group(1))
        raise RuntimeError("the browser did not start: " + seen.decode(errors="replace")[-2000:])

    def call(self, method, **params):
        self.next_id += 1
        ident = self.next_id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})

    def wait_event(self, method, since=0, timeout=30):
        """The first event named method among self.events[since:], waiting
        up to timeout seconds for the browser to report one (each call
        collects what it reported before its answer)."""
        deadline = time.time() + timeout
        while True:
            for e in self.events[since:]:
                if e["method"] == method:
                    return e
            if time.time() > deadline:
                raise TimeoutError("the browser never reported " + method)
            time.sleep(0.1)
            self.call("Browser.getVersion")

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (JSON-able)."""
        r = self.call("Runtime.evaluate", expression=expression,
                      returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expression, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_for(self, expression, timeout=30):
        """Waits until expression is true in the page; returns its value."""
        deadline = time.time() + timeout
        error = ""
        while True:
            try:  # a page still loading may have no body yet
                value = self.evaluate(expression)
            except RuntimeError as e:
                value, error = None, "; last: %s" % e
            if value:
                return value
            if time.time() > deadline:
                raise TimeoutError("the page never made true: " + expression + error)
            time.sleep(0.2)

    def open(self, url):
        self.call("Page.navigate", url=url)

    def resize(self, width, height):
        self.call("Emulation.setDeviceMetricsOverride", width=width,
                  height=height, deviceScaleFactor=1, mobile=False)

    def click(self, selector):
        """A real mouse click (pressed and released) at the middle of the
        first element that selector finds, as a person would make it."""
        box = self.evaluate(
            "(function(){var e=document.querySelector(%s);if(!e)return null;"
            "e.scrollIntoView({block:'center'});var r=e.getBoundingClientRect();"
            "return [r.left+r.width/2,r.top+r.height/2];})()" % json.dumps(selector))
        if box is None:
            raise RuntimeError("nothing to click: " + selector)
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1],
                      button="left" if kind != "mouseMoved" else "none",
                      clickCount=1 if kind != "mouseMoved" else 0)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(path + ": not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color not in (2, 6):
                raise ValueError("%s: colour type %d, depth %d" % (path, color, depth))
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows
