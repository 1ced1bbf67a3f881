"""Kernels compiled by numba, loaded once per process, off the thread that needs them.

A module with numba loops (the tracker's :mod:`.perception.track_jit`, the planner's
:mod:`.planning.frenet_jit`) keeps a numpy twin that gives the same numbers: the numpy form is
the readable reference, and it serves where numba is not installed (the GPU machine, whose carry
limit has no room for llvmlite), where ``RT_FUSION_JIT=0``, and while the compiled form loads.
Loading costs ~0.4 s from numba's on-disk cache (its import and LLVM linking), ~10 s of
compilation after an install: a node need not wait for either. It *defers* the compiled set
while it builds its objects, then loads it on a thread of its own once it is up
(:meth:`CompiledSet.load_in_background`); each user asks :meth:`CompiledSet.get` again until
:meth:`CompiledSet.pending` is False, and swaps then.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

T = TypeVar('T')
_F = TypeVar('_F', bound=Callable[..., Any])


def njit(fn: _F) -> _F:
    """numba's njit, cached on disk beside the module, releasing the GIL; typed for mypy. Only
    modules imported where numba is installed use it."""
    import numba  # noqa: PLC0415 (optional and slow: only the compiled modules import it)

    return cast(_F, numba.njit(cache=True, nogil=True)(fn))


def wanted(jit: bool | None) -> bool:
    """Whether compiled kernels are wanted: ``jit``, or (None) unless ``RT_FUSION_JIT=0``."""
    return os.environ.get('RT_FUSION_JIT', '1') != '0' if jit is None else jit


class CompiledSet(Generic[T]):
    """One set of compiled kernels: ``load`` imports their module and returns them (it raises
    ImportError where numba is not installed: the set is then None for good)."""

    def __init__(self, load: Callable[[], T]) -> None:
        self._load = load
        self._value: T | None = None
        self._tried = False
        self._lock = threading.Lock()
        self._loading = threading.Event()
        self._deferred = threading.Event()
        self.failed: list[BaseException] = []  # what went wrong loading in the background

    def compiled(self) -> T | None:
        """The set, loaded on the first call (None: numba is not installed)."""
        with self._lock:
            if not self._tried:
                try:
                    self._value = self._load()
                except ImportError:
                    self._value = None
                self._tried = True
            return self._value

    def get(self, jit: bool | None = None) -> T | None:
        """The compiled set when wanted (:func:`wanted`) and loaded or loadable here and now;
        None (use the numpy twin) where numba is missing, turned off, deferred, loading in the
        background, or if that failed."""
        if not wanted(jit) or self.pending() or self.failed:
            return None
        return self.compiled()

    def defer(self) -> None:
        """Until :meth:`load_in_background` has run, :meth:`get` gives None: a node builds its
        objects while starting and loads the compiled set once it is up (without this, the
        first user would import numba there and then, and compile on its first call)."""
        if wanted(None) and not self._tried:
            self._deferred.set()

    def loading(self) -> bool:
        """True while :meth:`load_in_background` is at work."""
        return self._loading.is_set()

    def pending(self) -> bool:
        """True while :meth:`get` gives None only for now (deferred or loading): a user made
        meanwhile asks again later, and stops asking once this is False."""
        return self._loading.is_set() or self._deferred.is_set()

    def load_in_background(
        self, warm: Callable[[T], object], start: Callable[[Callable[[], None]], object]
    ) -> bool:
        """Loads the set (numba's import, its cache or a compilation) and calls ``warm`` with
        it, off the caller's thread: ``start`` runs the given work on a thread (a node's
        ``realtime.start_in_background``). Until it is done :meth:`get` gives None. False
        (nothing started) where numba is not wanted, or the set is loaded or being loaded."""
        if not wanted(None) or self._tried or self._loading.is_set():
            self._deferred.clear()  # nothing to wait for (loaded, loading, or not wanted)
            return False
        self._loading.set()  # before the deferral ends: get() never imports numba in between
        self._deferred.clear()

        def run() -> None:
            try:
                compiled = self.compiled()
                if compiled is not None:
                    warm(compiled)
            except BaseException as err:  # noqa: BLE001 (numpy keeps serving; the error is kept)
                self.failed.append(err)
            finally:
                self._loading.clear()

        start(run)
        return True
