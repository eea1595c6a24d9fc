"""Async variants: AsyncSandbox runs each blocking call of Sandbox on a
worker thread (asyncio.to_thread), so an event loop is never blocked; a
wrapper, not a second implementation (the HTTP stays the blocking
client's). Streams (`files.watch`, `processes.output`) come as async
iterators, each pulled item fetched on a thread. Callbacks of `run` are
called on the worker thread."""
import asyncio

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
        return cls(await asyncio.to_thread(Sandbox.create, **kw))

    @classmethod
    async def connect(cls, sandbox_id, **kw):
        return cls(await asyncio.to_thread(Sandbox.connect, sandbox_id, **kw))

    @classmethod
    async def list(cls, **kw):
        return await asyncio.to_thread(Sandbox.list, **kw)

    def mcp_url(self, name):
        return self.sync.mcp_url(name)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await asyncio.to_thread(self.sync.delete)
        return False
