/* Library Management: cudaLibrary_t and cudaKernel_t are the driver's
 * CUlibrary and CUkernel. Kernels handed out here are adopted by the
 * registry (register.h) so they can be launched cast to void*.
 *
 * An unloaded library is remembered (handle.h): the driver crashes on one
 * and on a bogus handle (NVIDIA's runtime with it). Each use answers what
 * NVIDIA's runtime answers for a NULL or unloaded library in that call
 * where it does not crash: a name looked up in it is not found, anything
 * else is an invalid handle. */
#include "handle.h"
#include "register.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* The library handle the driver wrote to *library is live again (it may
 * reuse an unloaded one's address); leaves through `r`. */
static cudaError_t loaded(CUresult r, cudaLibrary_t *library) {
  if (r == CUDA_SUCCESS) cudaev__handle_revive(*library);
  return cudaev__ret_cu(r);
}

/* More library options than there are kinds of option can only repeat
 * one; the driver reads all of them and crashed on 2^31 (NVIDIA's runtime
 * with it, which answers 2^31 JIT options with cudaErrorInvalidValue). */
static bool too_many_options(unsigned int numLibraryOptions) {
  return numLibraryOptions > CU_LIBRARY_NUM_OPTIONS;
}

cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *code,
                                enum cudaJitOption *jitOptions, void **jitOptionsValues,
                                unsigned int numJitOptions, enum cudaLibraryOption *libraryOptions,
                                void **libraryOptionValues, unsigned int numLibraryOptions) {
  CUDAEV_INIT_OR_RETURN();
  if (library == NULL || code == NULL || too_many_options(numLibraryOptions))
    return cudaev__ret(cudaErrorInvalidValue);
  return loaded(cudaev__drv.cuLibraryLoadData((CUlibrary *)library, code,
                                              (CUjit_option *)jitOptions, jitOptionsValues,
                                              numJitOptions, (CUlibraryOption *)libraryOptions,
                                              libraryOptionValues, numLibraryOptions),
                library);
}

/* Options the driver cannot read as given: too many (above), or a count
 * with no list to read them from. */
static bool bogus_options(enum cudaJitOption *jitOptions, void **jitOptionsValues,
                          unsigned int numJitOptions, enum cudaLibraryOption *libraryOptions,
                          void **libraryOptionValues, unsigned int numLibraryOptions) {
  return too_many_options(numLibraryOptions) ||
         (numJitOptions > 0 && (jitOptions == NULL || jitOptionsValues == NULL)) ||
         (numLibraryOptions > 0 && (libraryOptions == NULL || libraryOptionValues == NULL));
}

/* NVIDIA's runtime opens the file before it judges the options: a file
 * that cannot be read gets the answer it gets with good options. Ours
 * tries to read it; when that fails, the driver, asked with no options
 * (which it cannot misread), gives its own answer for that file. Returns
 * that answer, or CUDA_SUCCESS when the file is readable (then the
 * options are judged). */
static CUresult file_answer(const char *fileName) {
  /* Not blocking: a FIFO without a writer counts as readable. */
  int fd = open(fileName, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0) {
    char c;
    ssize_t n = read(fd, &c, 1);
    bool readable = n >= 0 || errno == EAGAIN;
    close(fd);
    if (readable) return CUDA_SUCCESS;
  }
  CUlibrary lib = NULL;
  CUresult r = cudaev__drv.cuLibraryLoadFromFile(&lib, fileName, NULL, NULL, 0, NULL, NULL, 0);
  if (r != CUDA_SUCCESS) return r;
  /* Readable after all (it changed in between): the load without the
   * caller's options is undone and the options are judged. */
  return cudaev__drv.cuLibraryUnload(lib);
}

cudaError_t cudaLibraryLoadFromFile(cudaLibrary_t *library, const char *fileName,
                                    enum cudaJitOption *jitOptions, void **jitOptionsValues,
                                    unsigned int numJitOptions,
                                    enum cudaLibraryOption *libraryOptions,
                                    void **libraryOptionValues, unsigned int numLibraryOptions) {
  CUDAEV_INIT_OR_RETURN();
  if (library == NULL || fileName == NULL) return cudaev__ret(cudaErrorInvalidValue);
  if (bogus_options(jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                    libraryOptionValues, numLibraryOptions)) {
    CUresult r = file_answer(fileName);
    if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  }
  if (too_many_options(numLibraryOptions)) return cudaev__ret(cudaErrorInvalidValue);
  return loaded(cudaev__drv.cuLibraryLoadFromFile((CUlibrary *)library, fileName,
                                                  (CUjit_option *)jitOptions, jitOptionsValues,
                                                  numJitOptions, (CUlibraryOption *)libraryOptions,
                                                  libraryOptionValues, numLibraryOptions),
                library);
}

cudaError_t cudaLibraryUnload(cudaLibrary_t library) {
  CUDAEV_INIT_OR_RETURN();
  if (library == NULL) return cudaev__ret(cudaErrorInvalidResourceHandle);
  CUDAEV_LIVE_OR_RETURN(library);
  cudaev__library_forget((CUlibrary)library);
  cudaev__handle_bury(library);
  CUresult r = cudaev__drv.cuLibraryUnload((CUlibrary)library);
  if (r != CUDA_SUCCESS) cudaev__handle_revive(library);
  return cudaev__ret_cu(r);
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t *pKernel, cudaLibrary_t library, const char *name) {
  CUDAEV_INIT_OR_RETURN();
  if (pKernel == NULL || name == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN_ERR(library, cudaErrorSymbolNotFound);
  CUkernel k = NULL;
  CUresult r = cudaev__drv.cuLibraryGetKernel(&k, (CUlibrary)library, name);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  if (cudaev__kernel_adopt(k, (CUlibrary)library)) return cudaev__ret(cudaErrorMemoryAllocation);
  *pKernel = (cudaKernel_t)k;
  return cudaSuccess;
}

cudaError_t cudaLibraryGetKernelCount(unsigned int *count, cudaLibrary_t lib) {
  CUDAEV_INIT_OR_RETURN();
  if (count == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN(lib);
  return cudaev__ret_cu(cudaev__drv.cuLibraryGetKernelCount(count, (CUlibrary)lib));
}

cudaError_t cudaLibraryEnumerateKernels(cudaKernel_t *kernels, unsigned int numKernels,
                                        cudaLibrary_t lib) {
  CUDAEV_INIT_OR_RETURN();
  if (kernels == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN(lib);
  CUresult r =
      cudaev__drv.cuLibraryEnumerateKernels((CUkernel *)kernels, numKernels, (CUlibrary)lib);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  for (unsigned i = 0; i < numKernels && kernels[i] != NULL; i++)
    if (cudaev__kernel_adopt((CUkernel)kernels[i], (CUlibrary)lib))
      return cudaev__ret(cudaErrorMemoryAllocation);
  return cudaSuccess;
}

/* Global addresses are per context: make one current first. */
cudaError_t cudaLibraryGetGlobal(void **dptr, size_t *bytes, cudaLibrary_t library,
                                 const char *name) {
  CUDAEV_CTX_OR_RETURN();
  if (dptr == NULL || name == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN_ERR(library, cudaErrorSymbolNotFound);
  CUdeviceptr p = 0;
  CUresult r = cudaev__drv.cuLibraryGetGlobal(&p, bytes, (CUlibrary)library, name);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  *dptr = (void *)(uintptr_t)p;
  return cudaSuccess;
}

cudaError_t cudaLibraryGetManaged(void **dptr, size_t *bytes, cudaLibrary_t library,
                                  const char *name) {
  CUDAEV_CTX_OR_RETURN();
  /* NVIDIA's runtime looks the name up before it looks at dptr. */
  if (name == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN_ERR(library, cudaErrorSymbolNotFound);
  CUdeviceptr p = 0;
  CUresult r = cudaev__drv.cuLibraryGetManaged(&p, bytes, (CUlibrary)library, name);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  if (dptr == NULL) return cudaev__ret(cudaErrorInvalidValue);
  *dptr = (void *)(uintptr_t)p;
  return cudaSuccess;
}

cudaError_t cudaLibraryGetUnifiedFunction(void **fptr, cudaLibrary_t library, const char *symbol) {
  CUDAEV_INIT_OR_RETURN();
  if (fptr == NULL || symbol == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUDAEV_LIVE_OR_RETURN_ERR(library, cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuLibraryGetUnifiedFunction(fptr, (CUlibrary)library, symbol));
}
