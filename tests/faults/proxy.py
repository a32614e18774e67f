"""A delaying TCP proxy for slow links: this kernel has no netem qdisc, so latency goes through a
small process that holds every chunk it forwards for a while.

    python -m tests.faults.proxy --listen 10.a.b.1:0 --to 10.a.b.15:9092 --delay 0.2 --jitter 0.1

It prints the port it listens on, then forwards each accepted connection to ``--to``; every chunk,
in either direction, leaves ``delay + uniform(0, jitter)`` seconds after it arrived, and never
before the chunk ahead of it on the same connection (TCP keeps byte order: jitter spreads the
latency, it cannot reorder bytes within a connection). Killing the process closes every
connection it carries, so the peers reconnect.

``DelayProxy`` runs it as a subprocess (tests/faults/nemesis.py's ``latency`` fault); a namespace's
iptables nat rule sends a node's new connections to the proxy (hosts.Network.redirect).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import selectors
import signal
import subprocess
import sys
import time

# The repository's root, where ``python -m tests.faults.proxy`` runs: the proxy imports nothing
# of the product, so a loaded machine starts it in a fraction of a second.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHUNK = 64 * 1024
START_TIMEOUT_S = 30.0  # how long the proxy gets to print its port (an interpreter's start, under load)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float, jitter: float,
                rng: random.Random) -> None:
    queue: asyncio.Queue = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def send() -> None:
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(send())
    last_due = 0.0
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            last_due = max(last_due, loop.time() + delay + rng.uniform(0, jitter))
            queue.put_nowait((last_due, data))
    except (ConnectionError, OSError):
        pass
    finally:
        queue.put_nowait((0.0, None))
        try:
            await sender
        except (ConnectionError, OSError):
            pass
        writer.close()


async def serve(listen: tuple[str, int], to: tuple[str, int], delay: float, jitter: float, seed: int) -> None:
    rng = random.Random(seed)

    async def accepted(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*to)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pump(client_r, server_w, delay, jitter, rng),
                             _pump(server_r, client_w, delay, jitter, rng), return_exceptions=True)

    server = await asyncio.start_server(accepted, *listen)
    print(server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


def _address(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


class DelayProxy:
    """The proxy as a subprocess listening on ``host``; ``port`` once started."""

    def __init__(self, host: str, to: tuple[str, int], delay: float, jitter: float, seed: int) -> None:
        cmd = [sys.executable, "-m", "tests.faults.proxy", "--listen", f"{host}:0", "--to",
               f"{to[0]}:{to[1]}", "--delay", str(delay), "--jitter", str(jitter), "--seed", str(seed)]
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL)
        line = _first_line(self.proc, START_TIMEOUT_S)
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"delay proxy did not start within {START_TIMEOUT_S}s (printed {line!r}, "
                               f"exit {self.proc.returncode})")
        self.port = int(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(START_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    """The first line ``proc`` prints, waited for up to ``timeout`` seconds: whatever it printed
    by then ('' if nothing). A port printed late is still the port: only the wait is bounded."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            chunk = os.read(fd, 4096)
            if not chunk:  # it exited
                break
            data += chunk
    return data.decode(errors="replace").split("\n", 1)[0] + ("\n" if b"\n" in data else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a TCP proxy that delays what it forwards")
    parser.add_argument("--listen", required=True, help="host:port (port 0: any)")
    parser.add_argument("--to", required=True, help="host:port")
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--jitter", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    asyncio.run(serve(_address(args.listen), _address(args.to), args.delay, args.jitter, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
