"""anyio on each of its backends: asyncio (cudaev's asyncio path) and trio
(its trio path): round trips, errors, a cancel scope and a timeout."""
import pytest

anyio = pytest.importorskip("anyio", reason="anyio does not import (Debian: python3-anyio)")

import cudaev  # noqa: E402
from conftest import live_ops  # noqa: E402

PATHS = {"asyncio": "cudaev._attach", "trio": "cudaev._trio"}


# anyio 3.6's trio backend subclasses trio.MultiError, which trio 0.22 deprecates.
@pytest.mark.filterwarnings("ignore:trio.MultiError is deprecated")
@pytest.mark.parametrize("backend", sorted(PATHS))
def test_backend(backend):
    if backend == "trio":
        pytest.importorskip("trio", reason="trio does not import (Debian: python3-trio)")

    async def main():
        base = live_ops()
        p = cudaev._promise()

        async def later():
            await anyio.sleep(0.005)
            p.set(0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(later)
            assert await p.wait() is None
        p = cudaev._promise()
        p.set(700)
        with pytest.raises(cudaev.CudaError):
            await p.wait()
        await cudaev._timer(0.002)
        # Before the cancel scope: anyio 3 on asyncio leaves a task's cancel
        # count raised once one of its scopes fired (it predates Python
        # 3.11's Task.uncancel), and asyncio.timeout, which timeout= uses,
        # then raises CancelledError instead of TimeoutError in that task.
        with pytest.raises(TimeoutError):
            await cudaev._promise().wait(timeout=0.01)
        p = cudaev._promise()
        with anyio.move_on_after(0.01) as scope:
            await p.wait()
        assert scope.cancel_called
        assert p.op.ready  # the cudaev future was cancelled too
        del p
        await anyio.sleep(0.01)
        assert live_ops() == base
        return type(cudaev._attach.attached()).__module__

    assert anyio.run(main, backend=backend) == PATHS[backend]
