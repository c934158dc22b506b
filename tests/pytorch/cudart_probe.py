"""A pytest plugin (tests/pytorch/graphs.sh loads it with -p): at the end of
each pytest process, one line on stderr names every libcudart.so.13 the
process mapped and the library the process's global scope resolves
cudaMalloc to, so the runner proves which runtime served PyTorch's calls
in every worker, not only in the first."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dropin import mapped_cudart  # noqa: E402


def pytest_sessionfinish(session, exitstatus):
    who = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.environ.get("CUDART_PROBE_LOG", os.devnull), "a") as f:
        f.write(f"[cudart] worker={who} {mapped_cudart()}\n")
