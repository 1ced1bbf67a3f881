"""The transport benchmark's peers from PyPI (``tools/bench_transport.py --peers``): iceoryx2
publish/subscribe with loaned samples, and Zenoh with shared memory, written and read the way a
Python user of each library would, on the same paced plan as rt_fusion's own paths.

Each frame carries its scenario, index and commit time in its first bytes (``transport._HDR``),
written just before it is sent; the reader measures from there to holding a numpy view of it.

- **iceoryx2**: a ``Slice[c_uint8]`` publish/subscribe service (the publisher loans a sample of
  the frame's size in shared memory, the frame is copied into it, as rt_fusion's writer copies
  into its slot), and an event service whose notifier wakes the readers' listeners (the
  iceoryx2 way to block instead of polling). The reader's view is a numpy array over the
  sample's payload pointer: no copy.
- **Zenoh**: a peer session per process on loopback TCP (each reader listens, the writer
  connects to every reader, so no scouting and no retry); the writer allocates each frame from a
  ``ShmProvider`` (POSIX shared memory) and puts the buffer; the readers get it as shared memory
  (``ZBytes.as_shm``). zenoh-python 1.10 exposes a shared-memory buffer to Python only through
  ``bytes()`` (``ZShm`` has no buffer protocol) and fills one only from ``bytes`` (``ZShmMut``
  refuses a numpy array): a copy on each side is the cost of its Python API, not of Zenoh.
"""

from __future__ import annotations

import ctypes
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

#: The peers this module runs (names as bench_transport's paths).
PEERS = ('iceoryx2', 'zenoh')


def _view(address: int, size: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(address))


def _iox_service(name: str) -> tuple[Any, Any, Any]:
    import iceoryx2 as iox2  # noqa: PLC0415 - an optional peer

    iox2.set_log_level_from_env_or(iox2.LogLevel.Error)
    node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
    service_name = iox2.ServiceName.new(name)
    pubsub = (
        node.service_builder(service_name)
        .publish_subscribe(iox2.Slice[ctypes.c_uint8])
        .subscriber_max_buffer_size(4)
        .max_subscribers(8)
        .open_or_create()
    )
    event = node.service_builder(service_name).event().open_or_create()
    return node, pubsub, event


def iox_writer(
    name: str, readers: int, largest: int
) -> tuple[Callable[[np.ndarray, Callable[[], bytes]], None], Callable[[], None]]:
    """An iceoryx2 publisher of frames up to ``largest`` bytes, once ``readers`` subscribed:
    (send(frame, header), close)."""
    import iceoryx2 as iox2  # noqa: PLC0415

    node, pubsub, event = _iox_service(name)
    alive = [node]  # the iceoryx2 node outlives its ports: released by close()
    pub = (
        pubsub.publisher_builder()
        .initial_max_slice_len(largest)
        .allocation_strategy(iox2.AllocationStrategy.Static)
        .create()
    )
    notifier = event.notifier_builder().create()
    deadline = time.monotonic() + 60
    while pubsub.dynamic_config.number_of_subscribers < readers:
        if time.monotonic() > deadline:
            raise RuntimeError(f'iceoryx2: {readers} subscriber(s) did not come within 60 s')
        time.sleep(0.02)  # paced: waiting for the readers

    def send(frame: np.ndarray, header: Callable[[], bytes]) -> None:
        flat = frame.reshape(-1)
        sample = pub.loan_slice_uninit(flat.size)
        view = _view(sample.payload_ptr, flat.size)
        np.copyto(view, flat)  # the producer's work: the frame into its slot
        head = header()  # stamped once the frame is in place, as rt_fusion's commit is
        view[: len(head)] = np.frombuffer(head, np.uint8)
        sample.assume_init().send()
        notifier.notify()

    def close() -> None:
        notifier.delete()
        pub.delete()
        alive.clear()

    return send, close


def iox_reader(name: str, on_frame: Callable[[np.ndarray], None]) -> Any:
    """An iceoryx2 subscriber + listener; returns ``poll(timeout_s)`` that hands every frame
    received as a numpy view (valid during the call) to ``on_frame``."""
    import iceoryx2 as iox2  # noqa: PLC0415

    node, pubsub, event = _iox_service(name)
    sub = pubsub.subscriber_builder().buffer_size(4).create()
    listener = event.listener_builder().create()

    def poll(timeout_s: float) -> None:
        listener.timed_wait(iox2.Duration.from_secs_f64(timeout_s))
        while True:
            sample = sub.receive()
            if sample is None:
                return
            on_frame(_view(sample.payload_ptr, sample.header.number_of_elements))
            sample.delete()

    poll.node = node  # type: ignore[attr-defined]  # kept alive with the reader
    return poll


def _zenoh_config(listen: list[str], connect: list[str]) -> Any:
    import zenoh  # noqa: PLC0415 - an optional peer

    conf = zenoh.Config()
    conf.insert_json5('mode', '"peer"')
    conf.insert_json5('scouting/multicast/enabled', 'false')
    conf.insert_json5('listen/endpoints', json.dumps(listen))
    conf.insert_json5('connect/endpoints', json.dumps(connect))
    conf.insert_json5('transport/shared_memory/enabled', 'true')
    return conf


def zenoh_writer(
    key: str, endpoints: list[str], largest: int
) -> tuple[Callable[[np.ndarray, Callable[[], bytes]], None], Callable[[], None]]:
    """A Zenoh publisher connected to every reader's endpoint, frames from a shared-memory
    provider: (send(frame, header), close)."""
    import zenoh  # noqa: PLC0415
    from zenoh import shm  # noqa: PLC0415

    session = zenoh.open(_zenoh_config([], endpoints))
    pub = session.declare_publisher(key)
    provider = shm.ShmProvider.default_backend(largest * 8)
    policy = shm.BlockOn(shm.GarbageCollect())
    deadline = time.monotonic() + 60
    # zenoh-python 1.10 returns a MatchingStatus (its stubs say bool): either way, truthy.
    while not getattr(pub.matching_status, 'matching', pub.matching_status):
        if time.monotonic() > deadline:
            raise RuntimeError('zenoh: no subscriber matched within 60 s')
        time.sleep(0.02)  # paced: waiting for the readers

    staging: dict[int, bytearray] = {}

    def send(frame: np.ndarray, header: Callable[[], bytes]) -> None:
        # ZShmMut is filled from bytes or bytearray only: the frame goes into a staging
        # bytearray (the producer's work, as into rt_fusion's slot), then into the buffer.
        data = staging.setdefault(frame.nbytes, bytearray(frame.nbytes))
        np.copyto(np.frombuffer(data, np.uint8), frame.reshape(-1))
        buf = provider.alloc(frame.nbytes, policy=policy)
        head = header()  # stamped once the frame is staged; the copy into shm is Zenoh's
        data[: len(head)] = head
        buf[:] = data
        pub.put(buf)

    def close() -> None:
        pub.undeclare()
        session.close()

    return send, close


def zenoh_reader(
    key: str, endpoint: str, on_frame: Callable[[np.ndarray], None]
) -> Callable[[], None]:
    """A Zenoh subscriber listening on ``endpoint``; frames are handed to ``on_frame`` from
    Zenoh's own thread as numpy arrays over their bytes. Returns its close()."""
    import zenoh  # noqa: PLC0415

    session = zenoh.open(_zenoh_config([endpoint], []))

    def on_sample(sample: Any) -> None:
        payload = sample.payload
        data = payload.as_shm()
        raw = bytes(data) if data is not None else payload.to_bytes()
        on_frame(np.frombuffer(raw, np.uint8))

    subscriber = session.declare_subscriber(key, on_sample)

    def close() -> None:
        subscriber.undeclare()
        session.close()

    return close
