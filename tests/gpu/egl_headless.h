/* Headless EGL and OpenGL for the interop programs (interop_gl.cu,
 * interop_egl.c): an EGLDisplay on the NVIDIA EGL device (the one that
 * names a CUDA device through EGL_NV_device_cuda), a desktop OpenGL 4.5 core
 * context current on the calling thread (surfaceless where the display
 * allows it, else on a 16x16 pbuffer), and the GL functions the programs
 * call, all found at run time.
 *
 * libEGL.so.1 is dlopen'ed, not linked, and every GL function comes from
 * eglGetProcAddress (glvnd's libEGL hands out dispatch stubs for any gl*
 * name): a machine without the loader, or whose loader finds no NVIDIA EGL
 * driver, skips the program with exit 77 and a line saying why, instead of
 * failing to start. Where the loader's default lookup finds no NVIDIA
 * driver, name its vendor file:
 *   __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
 *
 * Include this before cuda_gl_interop.h: GL/glcorearb.h must come before
 * the GL/gl.h that header pulls in, or its 1.0/1.1 typedefs are skipped.
 *
 * What goes to stdout depends only on the driver, which both runs of
 * compare.sh share; version and vendor strings go to stderr.
 */
#ifndef CUDAEV_TESTS_GPU_EGL_HEADLESS_H
#define CUDAEV_TESTS_GPU_EGL_HEADLESS_H

#include <GL/glcorearb.h>
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct egl_headless {
  void *lib;
  PFNEGLGETPROCADDRESSPROC GetProcAddress;
  PFNEGLGETERRORPROC GetError;
  PFNEGLQUERYSTRINGPROC QueryString;
  PFNEGLINITIALIZEPROC Initialize;
  PFNEGLTERMINATEPROC Terminate;
  PFNEGLBINDAPIPROC BindAPI;
  PFNEGLCHOOSECONFIGPROC ChooseConfig;
  PFNEGLCREATECONTEXTPROC CreateContext;
  PFNEGLDESTROYCONTEXTPROC DestroyContext;
  PFNEGLCREATEPBUFFERSURFACEPROC CreatePbufferSurface;
  PFNEGLDESTROYSURFACEPROC DestroySurface;
  PFNEGLMAKECURRENTPROC MakeCurrent;
  PFNEGLRELEASETHREADPROC ReleaseThread;
  PFNEGLQUERYDEVICESEXTPROC QueryDevicesEXT;
  PFNEGLQUERYDEVICESTRINGEXTPROC QueryDeviceStringEXT;
  PFNEGLQUERYDEVICEATTRIBEXTPROC QueryDeviceAttribEXT;
  PFNEGLGETPLATFORMDISPLAYEXTPROC GetPlatformDisplayEXT;
  EGLDisplay dpy;
  EGLContext ctx;
  EGLSurface surface;     /* EGL_NO_SURFACE when surfaceless */
  const char *extensions; /* the display's */
  int cuda_device;        /* EGL_CUDA_DEVICE_NV of the chosen device */
};

/* The GL functions the programs call: X(name without "gl", type). */
#define EGLH_GL_FUNCTIONS(X)                 \
  X(GetError, PFNGLGETERRORPROC)             \
  X(GetString, PFNGLGETSTRINGPROC)           \
  X(Finish, PFNGLFINISHPROC)                 \
  X(Flush, PFNGLFLUSHPROC)                   \
  X(PixelStorei, PFNGLPIXELSTOREIPROC)       \
  X(GenTextures, PFNGLGENTEXTURESPROC)       \
  X(DeleteTextures, PFNGLDELETETEXTURESPROC) \
  X(BindTexture, PFNGLBINDTEXTUREPROC)       \
  X(TexImage2D, PFNGLTEXIMAGE2DPROC)         \
  X(TexStorage2D, PFNGLTEXSTORAGE2DPROC)     \
  X(TexSubImage2D, PFNGLTEXSUBIMAGE2DPROC)   \
  X(TexParameteri, PFNGLTEXPARAMETERIPROC)   \
  X(GetTexImage, PFNGLGETTEXIMAGEPROC)       \
  X(GenBuffers, PFNGLGENBUFFERSPROC)         \
  X(DeleteBuffers, PFNGLDELETEBUFFERSPROC)   \
  X(BindBuffer, PFNGLBINDBUFFERPROC)         \
  X(BufferData, PFNGLBUFFERDATAPROC)         \
  X(GetBufferSubData, PFNGLGETBUFFERSUBDATAPROC)

struct egl_headless_gl {
#define EGLH_GL_MEMBER(name, type) type name;
  EGLH_GL_FUNCTIONS(EGLH_GL_MEMBER)
#undef EGLH_GL_MEMBER
};

/* A function pointer from dlsym or eglGetProcAddress into a typed member:
 * memcpy, because neither C nor C++ converts an object pointer to a
 * function pointer without a warning. */
#define EGLH_SET(dst, ptr)                       \
  do {                                           \
    void (*s_fn_)(void) = (void (*)(void))(ptr); \
    memcpy(&(dst), &s_fn_, sizeof s_fn_);        \
  } while (0)
#define EGLH_DLSYM(e, member, name)           \
  do {                                        \
    void *d_p_ = dlsym((e)->lib, name);       \
    memcpy(&(e)->member, &d_p_, sizeof d_p_); \
  } while (0)

/* Whether the space-separated list holds name as a whole word. */
static inline int egl_has_ext(const char *list, const char *name) {
  size_t n = strlen(name);
  const char *p = list;
  while (p != NULL && (p = strstr(p, name)) != NULL) {
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    p += n;
  }
  return 0;
}

/* A process that hangs (a driver wait that never returns) is ended here,
 * with a line on stdout, long before the test runner's own limit. */
static inline void egl_headless_timeout(int sig) {
  static const char msg[] = "FAILED: timed out (watchdog)\n";
  (void)sig;
  if (write(1, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(3);
}

static inline void egl_headless_watchdog(unsigned seconds) {
  signal(SIGALRM, egl_headless_timeout);
  alarm(seconds);
}

/* Opens the display and makes a GL 4.5 core context current.
 * Returns 0; or 77 (skip) after a "SKIP: ..." line when there is no EGL
 * loader or no NVIDIA EGL device; or 1 after a "FAILED: ..." line when a
 * step that should work on an NVIDIA device fails. */
static inline int egl_headless_open(struct egl_headless *e) {
  memset(e, 0, sizeof *e);
  e->cuda_device = -1;
  e->lib = dlopen("libEGL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (e->lib == NULL) {
    printf("SKIP: no EGL loader (libEGL.so.1 not found)\n");
    fprintf(stderr, "[egl] %s\n", dlerror());
    return 77;
  }
  EGLH_DLSYM(e, GetProcAddress, "eglGetProcAddress");
  EGLH_DLSYM(e, GetError, "eglGetError");
  EGLH_DLSYM(e, QueryString, "eglQueryString");
  EGLH_DLSYM(e, Initialize, "eglInitialize");
  EGLH_DLSYM(e, Terminate, "eglTerminate");
  EGLH_DLSYM(e, BindAPI, "eglBindAPI");
  EGLH_DLSYM(e, ChooseConfig, "eglChooseConfig");
  EGLH_DLSYM(e, CreateContext, "eglCreateContext");
  EGLH_DLSYM(e, DestroyContext, "eglDestroyContext");
  EGLH_DLSYM(e, CreatePbufferSurface, "eglCreatePbufferSurface");
  EGLH_DLSYM(e, DestroySurface, "eglDestroySurface");
  EGLH_DLSYM(e, MakeCurrent, "eglMakeCurrent");
  EGLH_DLSYM(e, ReleaseThread, "eglReleaseThread");
  if (!e->GetProcAddress || !e->GetError || !e->QueryString || !e->Initialize || !e->Terminate ||
      !e->BindAPI || !e->ChooseConfig || !e->CreateContext || !e->DestroyContext ||
      !e->CreatePbufferSurface || !e->DestroySurface || !e->MakeCurrent || !e->ReleaseThread) {
    printf("FAILED: libEGL.so.1 lacks an EGL 1.4 function\n");
    return 1;
  }

  /* The device platform: enumerate EGL devices, take the NVIDIA one. */
  const char *client = e->QueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
  fprintf(stderr, "[egl] client extensions: %s\n", client ? client : "(none)");
  if (client == NULL || !egl_has_ext(client, "EGL_EXT_platform_device") ||
      !(egl_has_ext(client, "EGL_EXT_device_base") ||
        (egl_has_ext(client, "EGL_EXT_device_enumeration") &&
         egl_has_ext(client, "EGL_EXT_device_query")))) {
    printf("SKIP: no EGL device platform (EGL_EXT_platform_device, EGL_EXT_device_base)\n");
    return 77;
  }
  EGLH_SET(e->QueryDevicesEXT, e->GetProcAddress("eglQueryDevicesEXT"));
  EGLH_SET(e->QueryDeviceStringEXT, e->GetProcAddress("eglQueryDeviceStringEXT"));
  EGLH_SET(e->QueryDeviceAttribEXT, e->GetProcAddress("eglQueryDeviceAttribEXT"));
  EGLH_SET(e->GetPlatformDisplayEXT, e->GetProcAddress("eglGetPlatformDisplayEXT"));
  if (!e->QueryDevicesEXT || !e->QueryDeviceStringEXT || !e->QueryDeviceAttribEXT ||
      !e->GetPlatformDisplayEXT) {
    printf("FAILED: the EGL device extensions are listed but their functions are missing\n");
    return 1;
  }
  EGLDeviceEXT devs[16];
  EGLint ndev = 0;
  if (!e->QueryDevicesEXT(16, devs, &ndev)) ndev = 0;
  EGLDeviceEXT dev = EGL_NO_DEVICE_EXT;
  for (EGLint i = 0; i < ndev && dev == EGL_NO_DEVICE_EXT; i++) {
    const char *dx = e->QueryDeviceStringEXT(devs[i], EGL_EXTENSIONS);
    EGLAttrib cuda = -1;
    fprintf(stderr, "[egl] device %d extensions: %s\n", (int)i, dx ? dx : "(none)");
    if (dx != NULL && egl_has_ext(dx, "EGL_NV_device_cuda") &&
        e->QueryDeviceAttribEXT(devs[i], EGL_CUDA_DEVICE_NV, &cuda) && cuda >= 0) {
      dev = devs[i];
      e->cuda_device = (int)cuda;
    }
  }
  if (dev == EGL_NO_DEVICE_EXT) {
    printf(
        "SKIP: no NVIDIA EGL device (EGL_NV_device_cuda); set __EGL_VENDOR_LIBRARY_FILENAMES to "
        "NVIDIA's 10_nvidia.json\n");
    return 77;
  }

  e->dpy = e->GetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, dev, NULL);
  EGLint major = 0, minor = 0;
  if (e->dpy == EGL_NO_DISPLAY || !e->Initialize(e->dpy, &major, &minor)) {
    printf("FAILED: eglInitialize on the NVIDIA device display (0x%x)\n", e->GetError());
    return 1;
  }
  const char *apis = e->QueryString(e->dpy, EGL_CLIENT_APIS);
  e->extensions = e->QueryString(e->dpy, EGL_EXTENSIONS);
  if (e->extensions == NULL) e->extensions = "";
  fprintf(stderr, "[egl] %s, EGL %d.%d (%s), APIs: %s\n", e->QueryString(e->dpy, EGL_VENDOR),
          (int)major, (int)minor, e->QueryString(e->dpy, EGL_VERSION), apis ? apis : "?");
  fprintf(stderr, "[egl] display extensions: %s\n", e->extensions);
  if (apis == NULL || !egl_has_ext(apis, "OpenGL")) {
    printf("FAILED: the NVIDIA EGL display offers no desktop OpenGL\n");
    return 1;
  }
  if ((major == 1 && minor < 5) && !egl_has_ext(e->extensions, "EGL_KHR_create_context")) {
    printf("FAILED: EGL %d.%d without EGL_KHR_create_context: no versioned GL context\n",
           (int)major, (int)minor);
    return 1;
  }
  if (!e->BindAPI(EGL_OPENGL_API)) {
    printf("FAILED: eglBindAPI(EGL_OPENGL_API) (0x%x)\n", e->GetError());
    return 1;
  }
  static const EGLint cfg_attrs[] = {EGL_SURFACE_TYPE,
                                     EGL_PBUFFER_BIT,
                                     EGL_RENDERABLE_TYPE,
                                     EGL_OPENGL_BIT,
                                     EGL_RED_SIZE,
                                     8,
                                     EGL_GREEN_SIZE,
                                     8,
                                     EGL_BLUE_SIZE,
                                     8,
                                     EGL_NONE};
  EGLConfig cfg;
  EGLint ncfg = 0;
  if (!e->ChooseConfig(e->dpy, cfg_attrs, &cfg, 1, &ncfg) || ncfg < 1) {
    printf("FAILED: no EGL config for an OpenGL pbuffer (0x%x)\n", e->GetError());
    return 1;
  }
  static const EGLint ctx_attrs[] = {EGL_CONTEXT_MAJOR_VERSION,
                                     4,
                                     EGL_CONTEXT_MINOR_VERSION,
                                     5,
                                     EGL_CONTEXT_OPENGL_PROFILE_MASK,
                                     EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                                     EGL_NONE};
  e->ctx = e->CreateContext(e->dpy, cfg, EGL_NO_CONTEXT, ctx_attrs);
  if (e->ctx == EGL_NO_CONTEXT) {
    printf("FAILED: eglCreateContext for OpenGL 4.5 core (0x%x)\n", e->GetError());
    return 1;
  }
  int surfaceless = egl_has_ext(e->extensions, "EGL_KHR_surfaceless_context");
  e->surface = EGL_NO_SURFACE;
  if (!surfaceless) {
    static const EGLint pb_attrs[] = {EGL_WIDTH, 16, EGL_HEIGHT, 16, EGL_NONE};
    e->surface = e->CreatePbufferSurface(e->dpy, cfg, pb_attrs);
    if (e->surface == EGL_NO_SURFACE) {
      printf("FAILED: eglCreatePbufferSurface (0x%x)\n", e->GetError());
      return 1;
    }
  }
  if (!e->MakeCurrent(e->dpy, e->surface, e->surface, e->ctx)) {
    printf("FAILED: eglMakeCurrent (0x%x)\n", e->GetError());
    return 1;
  }
  printf("egl: NVIDIA device of CUDA device %d, OpenGL 4.5 core context, %s\n", e->cuda_device,
         surfaceless ? "surfaceless" : "pbuffer");
  return 0;
}

/* Fills gl from eglGetProcAddress; 1 after a "FAILED" line when one is
 * missing. Prints the context's GL version strings to stderr. */
static inline int egl_headless_gl_load(struct egl_headless *e, struct egl_headless_gl *gl) {
#define EGLH_GL_LOAD(name, type)                            \
  EGLH_SET(gl->name, e->GetProcAddress("gl" #name));        \
  if (gl->name == NULL) {                                   \
    printf("FAILED: eglGetProcAddress(\"gl%s\")\n", #name); \
    return 1;                                               \
  }
  EGLH_GL_FUNCTIONS(EGLH_GL_LOAD)
#undef EGLH_GL_LOAD
  fprintf(stderr, "[gl] %s | %s | %s\n", (const char *)gl->GetString(GL_VENDOR),
          (const char *)gl->GetString(GL_RENDERER), (const char *)gl->GetString(GL_VERSION));
  return 0;
}

/* GL_CHECK(gl, what): a GL error here means the program's own GL calls
 * are wrong or the driver is broken, not a difference between runtimes. */
#define GL_CHECK(gl, what)                                                                 \
  do {                                                                                     \
    GLenum g_e_ = (gl)->GetError();                                                        \
    if (g_e_ != GL_NO_ERROR) {                                                             \
      printf("FAILED: GL error 0x%x after %s at %s:%d\n", g_e_, what, __FILE__, __LINE__); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

/* Releases the context and the display. libEGL stays loaded: the NVIDIA
 * driver it brought in may still have exit handlers to run. */
static inline void egl_headless_close(struct egl_headless *e) {
  if (e->dpy == EGL_NO_DISPLAY || e->dpy == NULL) return;
  e->MakeCurrent(e->dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
  if (e->surface != EGL_NO_SURFACE) e->DestroySurface(e->dpy, e->surface);
  if (e->ctx != EGL_NO_CONTEXT) e->DestroyContext(e->dpy, e->ctx);
  e->Terminate(e->dpy);
  e->ReleaseThread();
}

#endif
