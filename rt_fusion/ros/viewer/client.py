"""A Foxglove WebSocket client (protocol ``foxglove.sdk.v1``, as the Foxglove app speaks it), for
the viewer's test and benchmark: it subscribes to every channel the server advertises and
decodes what arrives with the schema advertised for it (protobuf descriptors, JSON schema)."""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import time
from collections.abc import Callable
from typing import Any

PROTOCOL = 'foxglove.sdk.v1'
OP_MESSAGE_DATA = 0x01  # binary: opcode, subscription id (u32), log time (u64), payload


def decoder(channel: dict[str, Any]) -> Callable[[bytes], Any]:
    """What decodes a channel's payloads, from its advertised schema."""
    if channel['encoding'] == 'json':
        return json.loads
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: PLC0415

    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(channel['schema']))
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(channel['schemaName']))
    return cls.FromString  # type: ignore[no-any-return]


async def listen(
    url: str,
    until: Callable[[dict[str, Any]], bool],
    deadline_s: float,
    keep: int = 5,
    connect_s: float = 60.0,
) -> dict[str, Any]:
    """Subscribes to every advertised channel until ``until(got)`` or the deadline; per topic:
    its channel, the first ``keep`` messages decoded, and ``count`` and ``bytes`` received.
    Connection refused is retried for ``connect_s`` (a server still starting); the server
    closing the connection ends the listening."""
    import websockets  # noqa: PLC0415

    got: dict[str, Any] = {}
    subs: dict[int, dict[str, Any]] = {}
    start = time.monotonic()
    while True:
        try:
            ws = await websockets.connect(url, subprotocols=[PROTOCOL], max_size=None)  # type: ignore[list-item]
            break
        except OSError:
            if time.monotonic() - start > connect_s:
                raise
            await asyncio.sleep(0.2)  # paced: the server is starting
    async with ws:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end and not until(got):
            try:
                raw = await asyncio.wait_for(ws.recv(), 0.5)
            except TimeoutError:
                continue
            except websockets.ConnectionClosed:
                break  # the server stopped (the graph ended): what arrived is the answer
            if isinstance(raw, str):
                op = json.loads(raw)
                if op['op'] == 'advertise':
                    new = [{'id': 1000 + c['id'], 'channelId': c['id']} for c in op['channels']]
                    for c in op['channels']:
                        subs[1000 + c['id']] = c
                        got[c['topic']] = {
                            'channel': c, 'messages': [], 'count': 0, 'bytes': 0,
                            'decode': decoder(c),
                        }  # fmt: skip
                    await ws.send(json.dumps({'op': 'subscribe', 'subscriptions': new}))
                continue
            if raw[0] == OP_MESSAGE_DATA:
                (sub,) = struct.unpack_from('<I', raw, 1)
                entry = got[subs[sub]['topic']]
                entry['count'] += 1
                entry['bytes'] += len(raw) - 13
                if len(entry['messages']) < keep:
                    entry['messages'].append(entry['decode'](bytes(raw[13:])))
    return got


class StalledClient:
    """A Foxglove WebSocket client that subscribes to every advertised channel and then never
    reads again (a laptop asleep, a browser tab in the background): the server's outbox for it
    fills. Its receive buffer is kept small and its library queue at one message, so the stall
    reaches the server within seconds."""

    def __init__(self, url: str, connect_s: float = 60.0) -> None:
        import socket  # noqa: PLC0415

        from websockets.sync.client import connect  # noqa: PLC0415

        sock = None
        end = time.monotonic() + connect_s
        while sock is None:
            host, port = url.removeprefix('ws://').split(':')
            try:
                sock = socket.create_connection((host, int(port)), timeout=10.0)
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.2)  # paced: the server is starting
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.ws = connect(
            url, sock=sock, subprotocols=[PROTOCOL], max_queue=1, max_size=None,  # type: ignore[list-item]
            ping_interval=None, close_timeout=1.0,
        ).__enter__()  # fmt: skip
        self.channels: list[dict[str, Any]] = []
        while not self.channels:
            raw = self.ws.recv(timeout=connect_s)
            if isinstance(raw, str) and json.loads(raw)['op'] == 'advertise':
                self.channels = json.loads(raw)['channels']
        subs = [{'id': 1000 + c['id'], 'channelId': c['id']} for c in self.channels]
        self.ws.send(json.dumps({'op': 'subscribe', 'subscriptions': subs}))

    def close(self) -> None:
        """Hangs up."""
        self.ws.close()
