"""Request and response bodies, as the C service reads and writes them
(examples/inference_server/parse.c): a JSON array of exactly N numbers
(RFC 8259: no NaN, no Infinity, no leading zeros, nothing around it) or N
raw little-endian float32; the answer is a JSON array of "%.9g" floats and a
newline, or raw float32. Bad input raises BadBody with a one-line reason.

Thread: pure functions, any thread.
"""
import json
import math
import struct

import numpy as np


class BadBody(ValueError):
    """The body is not what the endpoint takes: 400, with this reason."""


def content_kind(ct):
    """'json', 'raw' or None (415) for a Content-Type header value (None: JSON)."""
    if ct is None:
        return "json"
    t = ct.strip(" \t")
    for sep in (";", " ", "\t"):
        t = t.split(sep, 1)[0]
    t = t.lower()
    return {"application/json": "json", "application/octet-stream": "raw"}.get(t)


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


_decoder = json.JSONDecoder(parse_constant=_no_constant)


_NUMBER_TYPES = frozenset((int, float))
# Values past it may round to float32's largest finite value or overflow:
# those take the exact path below.
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def json_floats(body, n):
    """A float32 array of n from a JSON body (bytes)."""
    try:
        text = body.decode("utf-8")
        v = _decoder.decode(text)
    except json.JSONDecodeError as e:
        raise BadBody(f"bad JSON at byte {e.pos}: {e.msg}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BadBody(f"bad JSON: {(str(e).splitlines() or [type(e).__name__])[0]}") from None
    if not isinstance(v, list):
        raise BadBody(f"bad JSON: want an array of {n} numbers")
    # The element types at C speed; the loop only finds which one is wrong.
    if not _NUMBER_TYPES.issuperset(map(type, v)):
        for i, x in enumerate(v):
            if type(x) not in _NUMBER_TYPES:
                raise BadBody(f"bad JSON: element {i} is not a number")
    if len(v) != n:
        raise BadBody(f"wrong length: want {n} numbers, got {len(v)}")
    try:
        a = np.array(v, dtype=np.float64)
    except OverflowError:  # an integer past float64
        a = np.full(n, np.inf)
    if np.abs(a).max(initial=0.0) <= _FLOAT32_MAX:
        return a.astype(np.float32)
    with np.errstate(over="ignore"):
        out = a.astype(np.float32)
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        i = int(bad[0])
        raise BadBody(f"number {i} ({v[i]}) is out of float32 range")
    return out


def raw_floats(body, n):
    if len(body) != 4 * n:
        raise BadBody(f"wrong length: want {4 * n} bytes ({n} float32), got {len(body)}")
    out = np.frombuffer(body, "<f4").astype(np.float32)
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        raise BadBody(f"value {int(bad[0])} is not finite")
    return out


def format_json(row):
    """A row of float32 as the C service writes it: [%.9g,...] and a newline."""
    return ("[" + ",".join("%.9g" % x if math.isfinite(x) else "null" for x in row.tolist())
            + "]\n").encode()


def format_raw(row):
    return np.asarray(row, dtype="<f4").tobytes()


def pack_floats(values):
    """Raw float32 bytes of a list (for clients and tests)."""
    return struct.pack(f"<{len(values)}f", *values)
