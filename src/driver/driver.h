/* The one door to the CUDA driver.
 *
 * libcuda is never linked. On first use, cudaev__driver_load() dlopen()s
 * "libcuda.so.1", asks it for cuGetProcAddress and then fills one table,
 * cudaev__drv, with every entry point the toolkit's cudaTypedefs.h declares,
 * each asked for at the explicit CUDA version of its newest typedef (and the
 * per-thread-default-stream variants, members named *_ptds / *_ptsz, with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).
 *
 * An entry point the installed driver lacks points at a function that
 * returns CUDA_ERROR_NOT_SUPPORTED, so no caller ever jumps through NULL.
 *
 * The table is also the seam for CPU tests and fault injection:
 * cudaev__driver_install() replaces the whole table (no dlopen happens), and
 * a test may overwrite single members after loading.
 *
 * Thread: every function here may be called from any thread.
 */
#ifndef CUDAEV_DRIVER_H
#define CUDAEV_DRIVER_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cudaProfilerTypedefs.h>

/* The graphics-interop entry points join the table when the toolkit's
 * typedef header and the graphics API's own headers (Debian: libgl-dev,
 * libegl-dev, libvdpau-dev) are both there; otherwise those members are left
 * out and src/interop_{gl,egl,vdpau}.c compile to nothing (their exports
 * are stubbed). */
#if __has_include(<cudaGLTypedefs.h>) && __has_include(<GL/gl.h>)
#include <cudaGLTypedefs.h>
#define CUDAEV_HAVE_GL 1
#endif
#if __has_include(<cudaEGLTypedefs.h>) && __has_include(<EGL/egl.h>) && \
    __has_include(<EGL/eglext.h>)
#include <cudaEGLTypedefs.h>
#define CUDAEV_HAVE_EGL 1
#endif
#if __has_include(<cudaVDPAUTypedefs.h>) && __has_include(<vdpau/vdpau.h>)
#include <cudaVDPAUTypedefs.h>
#define CUDAEV_HAVE_VDPAU 1
#endif

#include "driver_table.h" /* generated: CUDAEV_DRIVER_TABLE(X) */

struct cudaev_driver {
#define CUDAEV__DRV_MEMBER(member, base, ver, suffix, ptds) PFN_##base##_v##ver##suffix member;
  CUDAEV_DRIVER_TABLE(CUDAEV__DRV_MEMBER)
#undef CUDAEV__DRV_MEMBER
};

/* The table. Valid once cudaev__driver_load() returned CUDA_SUCCESS. */
extern struct cudaev_driver cudaev__drv;

/* The fault-injection build (tests/fault/): the runtime is compiled a
 * second time with CUDAEV_FAULT_SITES, which makes every use of the table
 * name its source place, so a test knows which call site a driver call
 * comes from (and may answer it from a failing table) without any call site
 * being written for it. Never defined in the library. */
#ifdef CUDAEV_FAULT_SITES
/* Set by the test: returns the table that answers the call at file:line
 * (a table of its own). NULL: the real table. */
extern struct cudaev_driver *(*cudaev__drv_hook)(const char *file, int line);
struct cudaev_driver *cudaev__drv_at(const char *file, int line);
#ifndef CUDAEV_DRIVER_DEFINE
#define cudaev__drv (*cudaev__drv_at(__FILE__, __LINE__))
#endif
#endif

/* Why the driver could not be used, as the runtime reports it. */
enum cudaev__driver_status {
  CUDAEV__DRIVER_OK = 0,
  CUDAEV__DRIVER_NOT_FOUND,   /* no libcuda.so.1, or no cuGetProcAddress in it */
  CUDAEV__DRIVER_TOO_OLD,     /* cuDriverGetVersion < the toolkit's CUDA_VERSION */
  CUDAEV__DRIVER_INIT_FAILED, /* the driver refused to start: cudaev__driver_error() */
};

/* Loads libcuda and fills the table once; later calls return the first
 * outcome. Does not call cuInit. */
enum cudaev__driver_status cudaev__driver_load(void);

/* With CUDAEV__DRIVER_INIT_FAILED, the driver's CUresult (e.g. the stub
 * library's CUDA_ERROR_STUB_LIBRARY). */
CUresult cudaev__driver_error(void);

/* cuDriverGetVersion of the loaded driver, 0 when none loaded. */
int cudaev__driver_version(void);

/* Replaces the table with *fake and marks the driver loaded, skipping
 * dlopen: for tests that stand in for libcuda. Members left NULL in *fake
 * are pointed at the not-supported function. Call before any other
 * cudaev__driver_* or cuda* call. */
void cudaev__driver_install(const struct cudaev_driver *fake, int version);

/* Stream capture and the runtime's own driver calls.
 *
 * While any thread captures in global mode, every thread in global mode
 * (the default) is refused the "potentially unsafe" calls (allocation,
 * free, synchronisation), and one such call invalidates the capture.
 * NVIDIA's runtime has no threads of its own and makes no call the
 * application did not ask for. The runtime's own calls - on threads it made
 * (the pinned pool's reaper, a thread-mode loop) and, on the application's
 * threads, for objects of its own (staging buffers, the loop's marker
 * words) - are no part of any capture: they run in relaxed mode, so that
 * they never change what an application's capture sees (docs/design.md,
 * "Threads of our own and stream capture").
 *
 * cudaev__capture_relax() switches the calling thread to relaxed mode and
 * returns what to restore; cudaev__capture_restore() puts the thread's mode
 * back. A thread the runtime made calls cudaev__capture_relax() once, first
 * thing, and never restores. Without a driver, or if the driver refuses
 * the switch, nothing changes and nothing is restored. */
struct cudaev__capture_mode {
  CUstreamCaptureMode mode;
  int swapped;
};
struct cudaev__capture_mode cudaev__capture_relax(void);
void cudaev__capture_restore(struct cudaev__capture_mode saved);

#endif
