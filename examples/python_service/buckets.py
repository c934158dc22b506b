"""The batch (or length) sizes a CUDA graph is captured for: a request pads
up to the next one, so a handful of graphs serve every size.

Thread: pure, any thread.
"""


def buckets(top, first=1):
    """Powers of two from ``first`` below ``top``, then ``top``."""
    out, b = [], first
    while b < top:
        out.append(b)
        b *= 2
    return out + [top]
