#!/usr/bin/env python3
"""Write the linker version script: every reference export under the node
libcudart.so.13 (as NVIDIA's library has them), our own API under CUDAEV_0,
nothing else exported.

usage: gen_version_script.py EXPORTS OUT
"""
import sys

names = [l.strip() for l in open(sys.argv[1]) if l.strip()]
with open(sys.argv[2], "w") as f:
    f.write("libcudart.so.13 {\n  global:\n")
    for n in names:
        f.write("    %s;\n" % n)
    f.write("};\n\nCUDAEV_0 {\n  global:\n    cudaev_[a-z]*;\n  local:\n    *;\n};\n")
