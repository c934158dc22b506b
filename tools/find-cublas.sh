#!/usr/bin/env bash
# Prints the directory holding libcublas.so.13 (and libcublasLt.so.13):
# the toolkit's lib64 if it has them, else the first of the usual other
# places (other toolkit layouts, the nvidia-cublas Python wheel that
# PyTorch brings). Prints nothing and exits 1 when none has them.
# The inference service and its twin need cuBLAS; gpu-pack.sh does not
# carry it (over 500 MiB), so on the GPU machine it comes from there.
for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/targets/x86_64-linux/lib \
  /usr/local/cuda-13*/lib64 /usr/lib/x86_64-linux-gnu; do
  [ -e "$d/libcublas.so.13" ] && { echo "$d"; exit 0; }
done
for py in python3 /opt/torch/.venv/bin/python3; do
  d=$("$py" - 2>/dev/null <<'PY'
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path
for r in roots:
    for p in glob.glob(os.path.join(r, "nvidia", "*", "lib", "libcublas.so.13")):
        print(os.path.dirname(p)); raise SystemExit
PY
  )
  [ -n "$d" ] && { echo "$d"; exit 0; }
done
exit 1
