#!/usr/bin/env python3
"""A TCP proxy that adds a fixed delay to every HTTP request it forwards: an S3 server on this
machine made to answer like one across a network (the S3 benchmark puts it in front of moto).

    scripts/delay-proxy.py LISTEN_PORT TARGET_PORT [DELAY_MS]   # default 20 ms

Listens on 127.0.0.1:LISTEN_PORT and forwards to 127.0.0.1:TARGET_PORT. Each chunk from the
client that starts a request (begins with an HTTP method) waits DELAY_MS before it is forwarded;
request bodies and responses pass at once. Keep-alive connections keep their delay per request.
"""
import asyncio
import sys

METHODS = (b"GET ", b"PUT ", b"HEAD ", b"POST ", b"DELETE ")


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


async def main(listen_port, target_port, delay):
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


if __name__ == "__main__":
    listen, target = int(sys.argv[1]), int(sys.argv[2])
    delay_ms = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
    asyncio.run(main(listen, target, delay_ms / 1000.0))
