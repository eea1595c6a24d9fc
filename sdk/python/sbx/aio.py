"""Async variants: AsyncSandbox runs each blocking call of Sandbox on a
worker thread (asyncio.to_thread), so an event loop is never blocked; a
wrapper, not a second implementation (the HTTP stays the blocking
client's). Streams (`files.watch`, `processes.output`) come as async
iterators, each pulled item fetched on a thread. Callbacks of `run` are
called on the worker thread. Snapshots, volumes and images likewise
(`Snapshots`, `Volumes`, `Secrets`, `Images` below)."""
import asyncio

from . import resources
from .sandbox import Sandbox

_END = object()


def _next(it):
    try:
        return next(it)
    except StopIteration:
        return _END


class _Async:
    """Every method of the wrapped object as a coroutine; generators as
    async iterators (closed, and their connection with them, when the
    iteration ends or is left)."""

    _streams = ("watch", "output", "iter_read")

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr
        if name in self._streams:
            return lambda *a, **kw: _aiter(attr, a, kw)

        async def call(*a, **kw):
            return await asyncio.to_thread(attr, *a, **kw)
        return call


async def _aiter(fn, a, kw):
    it = await asyncio.to_thread(fn, *a, **kw)
    try:
        while True:
            item = await asyncio.to_thread(_next, it)
            if item is _END:
                return
            yield item
    finally:
        await asyncio.to_thread(it.close)


class AsyncSandbox(_Async):
    """`async with await AsyncSandbox.create(...) as sb: r = await sb.run("...")`."""

    def __init__(self, sandbox):
        super().__init__(sandbox)
        self.id = sandbox.id
        self.sync = sandbox
        self.files = _Async(sandbox.files)
        self.processes = _Async(sandbox.processes)
        self.ports = _Async(sandbox.ports)

    @classmethod
    async def create(cls, **kw):
        if isinstance(kw.get("snapshot"), AsyncResource):
            kw["snapshot"] = kw["snapshot"].sync
        return cls(await asyncio.to_thread(Sandbox.create, **kw))

    @classmethod
    async def connect(cls, sandbox_id, **kw):
        return cls(await asyncio.to_thread(Sandbox.connect, sandbox_id, **kw))

    @classmethod
    async def list(cls, **kw):
        return await asyncio.to_thread(Sandbox.list, **kw)

    async def fork(self, count=1):
        """The forks as AsyncSandboxes."""
        return [AsyncSandbox(sb) for sb in await asyncio.to_thread(self.sync.fork, count)]

    async def snapshot(self, name=None):
        """An AsyncSnapshot; `AsyncSandbox.create(snapshot=it)` restores it."""
        return AsyncResource(await asyncio.to_thread(self.sync.snapshot, name))

    def mcp_url(self, name):
        return self.sync.mcp_url(name)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await asyncio.to_thread(self.sync.delete)
        return False


class AsyncResource(_Async):
    """A Snapshot, Volume or Image whose calls (`delete`, `refresh`) are
    coroutines; `info` and the properties read as they are."""

    def __init__(self, inner):
        super().__init__(inner)
        self.sync = inner

    @property
    def info(self):
        return self.sync.info


class _AsyncCollection:
    """The classmethods of a resource class (create, get, list, ...) as
    coroutines answering AsyncResources."""

    def __init__(self, cls):
        self._cls = cls

    def __getattr__(self, name):
        fn = getattr(self._cls, name)

        async def call(*a, **kw):
            res = await asyncio.to_thread(fn, *a, **kw)
            if isinstance(res, resources._Resource):
                return AsyncResource(res)
            if isinstance(res, list):
                return [AsyncResource(r) if isinstance(r, resources._Resource) else r for r in res]
            return res
        return call


# `await aio.Snapshots.list()`, `await aio.Volumes.create("proj", "1G")`, ...
Snapshots = _AsyncCollection(resources.Snapshot)
Volumes = _AsyncCollection(resources.Volume)
Secrets = _AsyncCollection(resources.Secret)
Images = _AsyncCollection(resources.Image)
