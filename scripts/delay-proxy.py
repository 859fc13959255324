#!/usr/bin/env python3
"""A TCP proxy in front of an HTTP server on this machine (the S3 benchmark and the fault test
put it in front of moto): it adds a fixed delay to every request, and on request it breaks a
seeded fraction of requests the ways a network or an overloaded S3 server does.

    scripts/delay-proxy.py LISTEN_PORT TARGET_PORT [DELAY_MS] [fault options]

Listens on 127.0.0.1:LISTEN_PORT and forwards to 127.0.0.1:TARGET_PORT. DELAY_MS (default 20)
is waited before each request is forwarded; keep-alive connections keep their delay per request.

Without fault options bytes are piped as they come (each chunk from the client that starts a
request, i.e. begins with an HTTP method, waits DELAY_MS; bodies and responses pass at once).

With any fault fraction above zero the proxy reads HTTP/1.1 itself (one upstream connection per
client connection; Content-Length and chunked bodies; `Expect: 100-continue` answered by the
proxy) and each request meets one of:

  --drop F        the connection is closed before the request is forwarded (the server never
                  sees it);
  --cut F         the request is forwarded and carried out, the response is cut after its head
                  and --cut-bytes bytes of body (at most half the body; a response without a
                  body, or without a length, is cut inside its head), then the connection is
                  closed;
  --stall F       the request is forwarded and carried out, then nothing comes back for
                  --stall-ms (make it longer than the client's timeout), then the connection
                  is closed;
  --stall-body F  as --stall, but the head and --cut-bytes bytes of body (at most half) are
                  sent before the stall (a stream that stops midway);
  otherwise it passes whole.

The fractions add up (at most 1). Which requests fail is decided by a hash of --seed, the
request's method, target and Range header and how many times that same request was seen before
(a retry rolls again), so a run's faults do not depend on how concurrent requests interleave.
--methods GET,HEAD limits faults to those methods (default: all).

  --stats FILE    after each request, FILE holds JSON counts: requests, passed, drop, cut,
                  stall, stall_body, and faults per method ({"GET": {"cut": 3, ...}, ...}).
  --log FILE      one line per fault: kind, method, target.

Example: scripts/delay-proxy.py 9100 9000 0 --seed 7 --drop 0.05 --cut 0.05 --stall 0.02 \\
             --stall-ms 3000 --stats /tmp/faults.json

Standard library only.
"""
import argparse
import asyncio
import hashlib
import json
import os
import sys

METHODS = (b"GET ", b"PUT ", b"HEAD ", b"POST ", b"DELETE ")
KINDS = ("drop", "cut", "stall", "stall_body")
HEAD_LIMIT = 1 << 20


async def pipe(reader, writer, delay):
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            if delay and chunk.startswith(METHODS):
                await asyncio.sleep(delay)
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def plain(listen_port, target_port, delay):
    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pipe(client_reader, server_writer, delay),
            pipe(server_reader, client_writer, 0),
        )

    server = await asyncio.start_server(handle, "127.0.0.1", listen_port)
    async with server:
        await server.serve_forever()


class Closed(Exception):
    """The peer closed the connection between messages."""


def parse_head(head):
    """(start line, {lowercase name: value}) of a message head."""
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


async def read_head(reader):
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            raise Closed()
        raise


async def read_chunked(reader):
    """The raw bytes of a chunked body, trailers included."""
    raw = bytearray()
    while True:
        line = await reader.readuntil(b"\r\n")
        raw += line
        size = int(line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while True:
                trailer = await reader.readuntil(b"\r\n")
                raw += trailer
                if trailer == b"\r\n":
                    return bytes(raw)
        raw += await reader.readexactly(size + 2)


async def read_body(reader, headers, until_eof):
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await read_chunked(reader)
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if until_eof:
        return await reader.read()
    return b""


def without_expect(head):
    lines = head.split(b"\r\n")
    return b"\r\n".join(l for l in lines if not l.lower().startswith(b"expect:"))


class Faults:
    def __init__(self, args):
        self.args = args
        self.bounds = []
        total = 0.0
        for kind in KINDS:
            total += getattr(args, kind)
            self.bounds.append((total, kind))
        if total > 1.0:
            sys.exit("delay-proxy: fault fractions add up to more than 1")
        self.methods = (
            {m.strip().upper() for m in args.methods.split(",")} if args.methods else None
        )
        self.seen = {}
        self.stats = {"requests": 0, "passed": 0, **{k: 0 for k in KINDS}, "by_method": {}}
        self.log = open(args.log, "a", buffering=1) if args.log else None

    def decide(self, method, target, headers):
        key = f"{method} {target} {headers.get('range', '')}"
        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        if self.methods is not None and method not in self.methods:
            return None
        digest = hashlib.sha256(f"{self.args.seed}|{key}|{n}".encode()).digest()
        roll = int.from_bytes(digest[:8], "big") / 2.0**64
        for bound, kind in self.bounds:
            if roll < bound:
                return kind
        return None

    def count(self, kind, method, target):
        self.stats["requests"] += 1
        if kind is None:
            self.stats["passed"] += 1
        else:
            self.stats[kind] += 1
            per = self.stats["by_method"].setdefault(method, {})
            per[kind] = per.get(kind, 0) + 1
            if self.log:
                self.log.write(f"{kind} {method} {target}\n")
        if self.args.stats:
            tmp = self.args.stats + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.stats, f)
            os.replace(tmp, self.args.stats)


def close(*writers):
    for w in writers:
        try:
            w.close()
        except Exception:
            pass


async def serve_http(client_reader, client_writer, args, faults, delay):
    upstream = None
    try:
        while True:
            try:
                head = await read_head(client_reader)
            except (Closed, asyncio.IncompleteReadError, ConnectionError):
                return
            start, headers = parse_head(head)
            method, target = (start.split(" ") + ["", ""])[:2]
            if headers.get("expect", "").lower() == "100-continue":
                head = without_expect(head)
                client_writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await client_writer.drain()
            body = await read_body(client_reader, headers, until_eof=False)
            kind = faults.decide(method, target, headers)
            if delay:
                await asyncio.sleep(delay)
            if kind == "drop":
                faults.count(kind, method, target)
                return
            if upstream is None:
                upstream = await asyncio.open_connection(
                    "127.0.0.1", args.target_port, limit=HEAD_LIMIT
                )
            up_reader, up_writer = upstream
            up_writer.write(head + body)
            await up_writer.drain()
            while True:
                response_head = await read_head(up_reader)
                status_line, response_headers = parse_head(response_head)
                status = int(status_line.split(" ")[1])
                if status >= 200:
                    break
                client_writer.write(response_head)
            no_body = method == "HEAD" or status in (204, 304)
            response_body = (
                b"" if no_body else await read_body(up_reader, response_headers, until_eof=True)
            )
            faults.count(kind, method, target)
            part = min(args.cut_bytes, len(response_body) // 2)
            framed = "content-length" in response_headers or "chunked" in response_headers.get(
                "transfer-encoding", ""
            ).lower()
            if kind == "cut":
                # A body without a length ends where the connection does: cut in the head.
                if response_body and framed:
                    client_writer.write(response_head + response_body[:part])
                else:
                    client_writer.write(response_head[: len(response_head) // 2])
                await client_writer.drain()
                return
            if kind in ("stall", "stall_body"):
                if kind == "stall_body":
                    client_writer.write(response_head + response_body[:part])
                    await client_writer.drain()
                await asyncio.sleep(args.stall_ms / 1000.0)
                return
            client_writer.write(response_head + response_body)
            await client_writer.drain()
            if "close" in (
                response_headers.get("connection", "").lower(),
                headers.get("connection", "").lower(),
            ) or (not no_body and not framed):
                return
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        return
    finally:
        close(client_writer, *([upstream[1]] if upstream else []))


async def faulty(args, delay):
    faults = Faults(args)
    # asyncio keeps only weak references to the connection tasks: a task waiting on a stalled
    # or idle connection could be collected, leaving its connection open and unanswered.
    tasks = set()

    async def handle(client_reader, client_writer):
        task = asyncio.current_task()
        tasks.add(task)
        try:
            await serve_http(client_reader, client_writer, args, faults, delay)
        finally:
            tasks.discard(task)

    server = await asyncio.start_server(handle, "127.0.0.1", args.listen_port, limit=HEAD_LIMIT)
    async with server:
        await server.serve_forever()


def arguments():
    p = argparse.ArgumentParser(
        description="Delay and fault proxy for a local HTTP (S3) server; see the module doc."
    )
    p.add_argument("listen_port", type=int)
    p.add_argument("target_port", type=int)
    p.add_argument("delay_ms", type=float, nargs="?", default=20.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--drop", type=float, default=0.0)
    p.add_argument("--cut", type=float, default=0.0)
    p.add_argument("--stall", type=float, default=0.0)
    p.add_argument("--stall-body", dest="stall_body", type=float, default=0.0)
    p.add_argument("--cut-bytes", dest="cut_bytes", type=int, default=100)
    p.add_argument("--stall-ms", dest="stall_ms", type=float, default=5000.0)
    p.add_argument("--methods", default=None)
    p.add_argument("--stats", default=None)
    p.add_argument("--log", default=None)
    return p.parse_args()


if __name__ == "__main__":
    args = arguments()
    delay = args.delay_ms / 1000.0
    if any(getattr(args, k) > 0 for k in KINDS):
        asyncio.run(faulty(args, delay))
    else:
        asyncio.run(plain(args.listen_port, args.target_port, delay))
