/* Library Management: cudaLibrary_t and cudaKernel_t are the driver's
 * CUlibrary and CUkernel. Kernels handed out here are adopted by the
 * registry (register.h) so they can be launched cast to void*. */
#include "register.h"

cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *code,
                                enum cudaJitOption *jitOptions, void **jitOptionsValues,
                                unsigned int numJitOptions, enum cudaLibraryOption *libraryOptions,
                                void **libraryOptionValues, unsigned int numLibraryOptions) {
  CUDAEV_INIT_OR_RETURN();
  if (library == NULL || code == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuLibraryLoadData(
      (CUlibrary *)library, code, (CUjit_option *)jitOptions, jitOptionsValues, numJitOptions,
      (CUlibraryOption *)libraryOptions, libraryOptionValues, numLibraryOptions));
}

cudaError_t cudaLibraryLoadFromFile(cudaLibrary_t *library, const char *fileName,
                                    enum cudaJitOption *jitOptions, void **jitOptionsValues,
                                    unsigned int numJitOptions,
                                    enum cudaLibraryOption *libraryOptions,
                                    void **libraryOptionValues, unsigned int numLibraryOptions) {
  CUDAEV_INIT_OR_RETURN();
  if (library == NULL || fileName == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuLibraryLoadFromFile(
      (CUlibrary *)library, fileName, (CUjit_option *)jitOptions, jitOptionsValues, numJitOptions,
      (CUlibraryOption *)libraryOptions, libraryOptionValues, numLibraryOptions));
}

cudaError_t cudaLibraryUnload(cudaLibrary_t library) {
  CUDAEV_INIT_OR_RETURN();
  if (library == NULL) return cudaev__ret(cudaErrorInvalidValue);
  cudaev__library_forget((CUlibrary)library);
  return cudaev__ret_cu(cudaev__drv.cuLibraryUnload((CUlibrary)library));
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t *pKernel, cudaLibrary_t library, const char *name) {
  CUDAEV_INIT_OR_RETURN();
  if (pKernel == NULL || name == NULL) return cudaev__ret(cudaErrorInvalidValue);
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
  return cudaev__ret_cu(cudaev__drv.cuLibraryGetKernelCount(count, (CUlibrary)lib));
}

cudaError_t cudaLibraryEnumerateKernels(cudaKernel_t *kernels, unsigned int numKernels,
                                        cudaLibrary_t lib) {
  CUDAEV_INIT_OR_RETURN();
  if (kernels == NULL) return cudaev__ret(cudaErrorInvalidValue);
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
  CUdeviceptr p = 0;
  CUresult r = cudaev__drv.cuLibraryGetGlobal(&p, bytes, (CUlibrary)library, name);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  *dptr = (void *)(uintptr_t)p;
  return cudaSuccess;
}

cudaError_t cudaLibraryGetManaged(void **dptr, size_t *bytes, cudaLibrary_t library,
                                  const char *name) {
  CUDAEV_CTX_OR_RETURN();
  if (dptr == NULL || name == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUdeviceptr p = 0;
  CUresult r = cudaev__drv.cuLibraryGetManaged(&p, bytes, (CUlibrary)library, name);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);
  *dptr = (void *)(uintptr_t)p;
  return cudaSuccess;
}

cudaError_t cudaLibraryGetUnifiedFunction(void **fptr, cudaLibrary_t library, const char *symbol) {
  CUDAEV_INIT_OR_RETURN();
  if (fptr == NULL || symbol == NULL) return cudaev__ret(cudaErrorInvalidValue);
  return cudaev__ret_cu(cudaev__drv.cuLibraryGetUnifiedFunction(fptr, (CUlibrary)library, symbol));
}
