#!/usr/bin/env python3
"""Generates the bad-input cases (cases.c) from the toolkit's headers.

    gen.py EXPORTS_TXT INCLUDE_DIR OUT_C

Every export of src/exports.txt except the nvcc-internal __cuda* ones gets
cases; a _ptsz/_ptds export is called with the prototype of its base name.
The prototypes come from the `extern ... CUDARTAPI name(args);`
declarations of the runtime headers, so an export without a declaration
fails the build rather than going untested.

Each parameter has a baseline value (valid where one can be made: a live
object on a machine with a device, a zeroed scratch buffer for a pointer)
and bad variants; a case is the baseline call (variant "base") or the
baseline with one parameter replaced by one of its bad variants.
"""
import re
import sys

HEADERS = ["cuda_runtime_api.h", "cuda_profiler_api.h", "cuda_gl_interop.h",
           "cuda_egl_interop.h", "cuda_vdpau_interop.h"]
DECL = re.compile(r"extern\s+(?P<ret>[\w\s\*]+?)\s*CUDARTAPI\s+(?P<name>\w+)\s*"
                  r"\((?P<args>[^;{]*?)\)\s*;", re.S)

# Handle types: the object kind harness.c can create (or None).
HANDLES = {
    "cudaStream_t": "BI_STREAM", "cudaEvent_t": "BI_EVENT", "cudaGraph_t": "BI_GRAPH",
    "cudaGraphNode_t": "BI_NODE", "cudaGraphExec_t": "BI_EXEC", "cudaArray_t": "BI_ARRAY",
    "cudaArray_const_t": "BI_ARRAY", "cudaMipmappedArray_t": "BI_MIPMAP",
    "cudaMipmappedArray_const_t": "BI_MIPMAP", "cudaMemPool_t": "BI_POOL",
    "cudaUserObject_t": "BI_UOBJ", "cudaLibrary_t": "BI_LIBRARY", "cudaKernel_t": "BI_KERNEL",
    "cudaTextureObject_t": "BI_TEX", "cudaSurfaceObject_t": "BI_SURF",
    "cudaAsyncCallbackHandle_t": "BI_ASYNCCB", "cudaLogsCallbackHandle": "BI_LOGSCB",
    "cudaGraphicsResource_t": None, "cudaExternalMemory_t": None,
    "cudaExternalSemaphore_t": None, "EGLStreamKHR": None, "EGLImageKHR": None,
    "EGLSyncKHR": None,
}
# Function-pointer parameters: a no-op of the right type, or NULL.
CALLBACKS = {"cudaHostFn_t": "bi_host_fn", "cudaStreamCallback_t": "bi_stream_cb",
             "cudaAsyncCallback": "bi_async_cb", "cudaLogsCallback_t": "bi_logs_cb"}
# A valid enumerator to start from; other enums start at 0.
ENUM_BASE = {
    "enum cudaMemcpyKind": "cudaMemcpyDefault",
    "enum cudaDeviceAttr": "cudaDevAttrWarpSize",
    "enum cudaFuncAttribute": "cudaFuncAttributeMaxDynamicSharedMemorySize",
    "enum cudaMemPoolAttr": "cudaMemPoolReuseFollowEventDependencies",
    "enum cudaMemAllocationType": "cudaMemAllocationTypePinned",
    "enum cudaMemoryAdvise": "cudaMemAdviseSetReadMostly",
    "enum cudaMemRangeAttribute": "cudaMemRangeAttributeReadMostly",
    "enum cudaChannelFormatKind": "cudaChannelFormatKindFloat",
    "enum cudaDeviceP2PAttr": "cudaDevP2PAttrPerformanceRank",
    "enum cudaFlushGPUDirectRDMAWritesScope": "cudaFlushGPUDirectRDMAWritesToOwner",
    "cudaStreamAttrID": "cudaStreamAttributeAccessPolicyWindow",
    "cudaKernelNodeAttrID": "cudaKernelNodeAttributeAccessPolicyWindow",
    "enum cudaGLDeviceList": "cudaGLDeviceListAll",
}
# Structs passed by value: baseline initialiser (zeroes when absent).
STRUCT_BASE = {
    "dim3": "{1, 1, 1}",
    "struct cudaExtent": "{16, 16, 1}",
    "struct cudaPitchedPtr": "{bi_devbuf(r), 64, 16, 16}",
    "struct cudaMemLocation": "{cudaMemLocationTypeDevice, 0}",
}
STRUCTS = set(STRUCT_BASE) | {"cudaIpcMemHandle_t", "cudaIpcEventHandle_t", "cudaEglFrame"}
# void * parameters by name: device addresses (a device buffer with a GPU,
# else scratch; bogus addresses are safe to try), code/symbol addresses
# (the harness's own, never registered), a PTX image, host memory the
# runtime may write (never given a bogus address).
DEV_PTRS = {"devPtr", "dptr", "dst", "src"}
CODE_PTRS = {"func", "entryFuncAddr", "symbol", "symbolPtr"}
# const char * parameters by name.
STRINGS = {"pciBusId": '"0000:00:00.0"', "symbol": '"cuInit"', "name": '"k"'}
DEVICE_INTS = {"device", "dstDevice", "srcDevice", "peerDevice"}
ERROR_CODES = ["cudaSuccess", "cudaErrorInvalidValue", "(cudaError_t)46", "(cudaError_t)999",
               "(cudaError_t)1000", "(cudaError_t)10000", "(cudaError_t)999999",
               "(cudaError_t)-1", "(cudaError_t)0x7fffffff", "(cudaError_t)INT_MIN"]

# Allocations a successful case gives back at once (with a device), so that
# a batch's leftovers do not make later cases run out of memory: the
# parameter holding the allocation and how to release it.
RELEASE = {
    "cudaMalloc": (0, "BI_FREE_DEV"), "cudaMallocManaged": (0, "BI_FREE_DEV"),
    "cudaMallocPitch": (0, "BI_FREE_DEV"), "cudaMallocAsync": (0, "BI_FREE_DEV"),
    "cudaMallocFromPoolAsync": (0, "BI_FREE_DEV"), "cudaMalloc3D": (0, "BI_FREE_PITCHED"),
    "cudaMallocHost": (0, "BI_FREE_HOST"), "cudaHostAlloc": (0, "BI_FREE_HOST"),
    "cudaMallocArray": (0, "BI_FREE_ARRAY"), "cudaMalloc3DArray": (0, "BI_FREE_ARRAY"),
    "cudaMallocMipmappedArray": (0, "BI_FREE_MIPMAP"), "cudaHostRegister": (0, "BI_UNREGISTER"),
}

SIZE_BAD = [("0", "(size_t)0"), ("1", "(size_t)1"), ("2^31", "(size_t)1 << 31"),
            ("2^32", "(size_t)1 << 32"), ("2^62", "(size_t)1 << 62"), ("SIZE_MAX", "SIZE_MAX")]


def split_args(a):
    out, depth, cur = [], 0, ""
    for ch in a:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_param(p):
    p = re.sub(r"__dv\((?:[^()]|\([^()]*\))*\)", "", p)
    p = p.split("=")[0].strip()
    m = re.match(r"(.*?)(\w+)$", p)
    typ = " ".join(m.group(1).replace("*", " * ").split())
    return typ, m.group(2)


def prototypes(incdir):
    protos = {}
    for h in HEADERS:
        text = re.sub(r"/\*.*?\*/", "", open(f"{incdir}/{h}").read(), flags=re.S)
        for m in DECL.finditer(text):
            ret = [w for w in m["ret"].split() if not w.startswith("__")]
            args = " ".join(m["args"].split())
            params = [] if args == "void" else [parse_param(p) for p in split_args(args)]
            protos.setdefault(m["name"], (" ".join(ret), params))
    return protos


def error_names(incdir):
    text = open(f"{incdir}/driver_types.h").read()
    body = re.search(r"enum\s+__device_builtin__\s+cudaError\s*\{(.*?)\}", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return re.findall(r"(cudaError\w*|cudaSuccess)\s*=\s*(\d+)", body)


def classify(typ, name):
    """(baseline expression or None for a statement, [(label, expression)])."""
    cast = f"({typ})"
    if typ in HANDLES:
        kind = HANDLES[typ]
        if typ in ("cudaTextureObject_t", "cudaSurfaceObject_t"):
            bad = [("null", "0"), ("bogus", "0x1234"), ("ones", "~0ull")]
        else:
            bad = [("bogus", f"{cast}(uintptr_t)0x1234")]
            if kind is not None:
                bad.insert(0, ("null", f"{cast}0"))
        if typ == "cudaStream_t":
            # Valid special handles, bad for some functions (destroy, capture).
            bad += [("legacy", "cudaStreamLegacy"), ("perthread", "cudaStreamPerThread")]
        if kind is None:
            return f"{cast}0", bad
        bad.append(("destroyed", f"{cast}bi_obj(r, {kind}, BI_DESTROYED)"))
        return f"{cast}bi_obj(r, {kind}, BI_LIVE)", bad
    if typ in CALLBACKS:
        return CALLBACKS[typ], [("null", "0")]
    if typ == "cudaError_t":
        return None, [(f"code={c}", c) for c in ERROR_CODES]
    if typ in STRUCTS:
        init = STRUCT_BASE.get(typ, "{0}")
        bad = [("zero", "ZERO"), ("ones", "ONES")]
        if typ not in STRUCT_BASE:
            bad = bad[1:]
        return ("STRUCT", init), bad
    if typ.endswith("*"):
        if typ == "VdpGetProcAddress *":
            return "0", []
        if typ in ("void *", "const void *"):
            if name in DEV_PTRS:
                return "bi_devbuf(r)", [("null", "0"), ("bogus", "(void *)0x1234")]
            if name in CODE_PTRS:
                return "(const void *)&bi_not_a_kernel", [("null", "0"),
                                                          ("bogus", "(void *)0x1234")]
            if name == "code":
                return "bi_ptx", [("null", "0")]
        if typ == "const char *" and name in STRINGS:
            return STRINGS[name], [("null", "0")]
        fill = {"const struct cudaChannelFormatDesc *": "bi_fill_chan",
                "const struct cudaMemPoolProps *": "bi_fill_pool_props",
                "const struct cudaResourceDesc *": "bi_fill_resdesc",
                "const cudaGraphNode_t *": "bi_fill_nodes"}.get(typ)
        buf = f"bi_scratch(r, IDX, {fill or 0})"
        return f"({typ}){buf}", [("null", "0")]
    if typ.startswith("enum ") or typ in ("cudaStreamAttrID", "cudaKernelNodeAttrID"):
        base = ENUM_BASE.get(typ, "0")
        return f"{cast}{base}", [("-1", f"{cast}-1"), ("1000", f"{cast}1000"),
                                 ("0x7fffffff", f"{cast}0x7fffffff")]
    if typ in ("int", "EGLint"):
        if name in DEVICE_INTS:
            return "0", [("-1", "-1"), ("-2", "-2"), ("1000", "1000"), ("INT_MIN", "INT_MIN")]
        base = {"blockSize": "32", "numBlocks": "1", "count": "1", "len": "64", "x": "32",
                "width": "16", "height": "16"}.get(name, "0")
        bad = [("-1", "-1"), ("INT_MAX", "INT_MAX"), ("INT_MIN", "INT_MIN")]
        if base != "0":
            bad.insert(0, ("0", "0"))
        return base, bad
    if typ in ("unsigned int", "GLuint", "GLenum", "VdpDevice", "VdpVideoSurface",
               "VdpOutputSurface"):
        if "flags" in name.lower():
            return "0u", [("0x100", "0x100u"), ("0xffffffff", "0xffffffffu"),
                          ("0x80000000", "0x80000000u")]
        base = {"cudaVersion": "13000u", "count": "1u", "initialRefcount": "1u", "numLevels": "1u",
                "numExtSems": "1u", "numKernels": "1u", "cudaDeviceCount": "1u"}.get(name, "0u")
        bad = [("0xffffffff", "0xffffffffu"), ("0x80000000", "0x80000000u")]
        if base != "0u":
            bad.insert(0, ("0", "0u"))
        return base, bad
    if typ == "unsigned long long":
        return "0ull", [("2^32", "1ull << 32"), ("2^62", "1ull << 62"), ("~0", "~0ull")]
    if typ == "size_t":
        if "ffset" in name or name in ("paramIndex", "minBytesToKeep", "value", "sharedMem",
                                        "dynamicSMemSize"):
            base = "0"
        elif name.startswith("num"):
            base = "1"
        elif name == "dataSize":
            base = "4"
        elif "pitch" in name:
            base = "64"
        else:
            base = "16"
        return f"(size_t){base}", [(l, e) for l, e in SIZE_BAD if not (l == "0" and base == "0")]
    raise SystemExit(f"gen.py: no argument variants for type '{typ}' ({name})")


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    exports_txt, incdir, out = sys.argv[1:4]
    exports = [l.strip() for l in open(exports_txt) if l.strip()]
    exports = [e for e in exports if not e.startswith("__cuda")]
    protos = prototypes(incdir)
    missing = [e for e in exports if re.sub(r"_pt(sz|ds)$", "", e) not in protos]
    if missing:
        raise SystemExit("gen.py: exports without a prototype in the headers: " + " ".join(missing))
    o = ["/* Generated by tests/badinput/gen.py from the toolkit's headers: do not edit. */",
         '#include "harness.h"', ""]
    table = []
    for fi, exp in enumerate(exports):
        base = re.sub(r"_pt(sz|ds)$", "", exp)
        ret, params = protos[base]
        rows = [("base", None, None)]
        for i, (typ, name) in enumerate(params):
            _, bad = classify(typ, name)
            for label, expr in bad:
                rows.append((f"{name}={label}" if not label.startswith("code=") else label, i, expr))
        if ret == "cudaError_t":
            store = "r->err = "
        elif ret == "const char *" or ret == "const char*":
            store = "r->str = "
        elif ret == "struct cudaChannelFormatDesc":
            store = "r->chan = "
        else:
            raise SystemExit(f"gen.py: {base} returns {ret}")
        rk = {"r->err = ": "BI_RET_ERR", "r->str = ": "BI_RET_STR", "r->chan = ": "BI_RET_CHAN"}[store]
        for label, which, bad in rows:
            if label == "base" and any(classify(t, n)[0] is None for t, n in params):
                continue  # only the listed values (cudaGetErrorName's codes)
            ci = len(table)
            fn_start = len(o)
            o.append(f"/* {exp} | {label} */")
            o.append(f"static void c{ci}(struct bi_run *r) {{")
            args = []
            for i, (typ, name) in enumerate(params):
                baseline, _ = classify(typ, name)
                expr = bad if i == which else baseline
                v = f"a{i}"
                if isinstance(baseline, tuple):  # struct by value
                    if expr == "ZERO":
                        o.append(f"  {typ} {v};\n  memset(&{v}, 0, sizeof {v});")
                    elif expr == "ONES":
                        o.append(f"  {typ} {v};\n  memset(&{v}, 0xff, sizeof {v});")
                    else:
                        o.append(f"  {typ} {v} = {baseline[1]};")
                else:
                    o.append(f"  {typ} {v} = {expr.replace('IDX', str(i))};")
                args.append(v)
            o.append("  if (r->skip) return;")
            o.append(f"  {store}((__typeof__(&{base}))bi_fn[{fi}])({', '.join(args)});")
            if base in RELEASE:
                i, how = RELEASE[base]
                o.append(f"  if (r->err == cudaSuccess) bi_release({how}, (void *)a{i});")
            o.append("}")
            # Cases that make objects cannot run before the runtime is
            # initialised (harness.c: cold cases).
            setup = any(w in line for line in o[fn_start + 2:]
                        for w in ("bi_obj", "bi_devbuf", "bi_fill_resdesc", "bi_fill_nodes"))
            table.append(f"  {{{fi}, {c_string(label)}, c{ci}, {rk}, {int(setup)}}},")
    o.append("")
    o.append(f"const int bi_nexports = {len(exports)};")
    o.append("const char *const bi_exports[] = {")
    o += [f"  {c_string(e)}," for e in exports]
    o.append("};")
    o.append(f"const int bi_ncases = {len(table)};")
    o.append("const struct bi_case bi_cases[] = {")
    o += table
    o.append("};")
    o.append("const struct bi_errname bi_errnames[] = {")
    o += [f"  {{{v}, {c_string(n)}}}," for n, v in error_names(incdir)]
    o.append("  {0, 0},")
    o.append("};")
    o.append(f"void *bi_fn[{len(exports)}];")
    with open(out, "w") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
