/* Unified Addressing: cudaPointerGetAttributes.
 *
 * One cuPointerGetAttributes call answers every field: unlike
 * cuPointerGetAttribute it does not fail on a pointer the driver does not
 * know, which is what lets cudaPointerGetAttributes report plain host
 * memory (and freed memory) as cudaMemoryTypeUnregistered with cudaSuccess,
 * as it has since CUDA 11. */
#include "internal.h"
#include "memory.h"

#include <string.h>

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr) {
  CUDAEV_CTX_OR_RETURN();
  if (attributes == NULL) return cudaev__ret(cudaErrorInvalidValue);
  CUpointer_attribute q[] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    CU_POINTER_ATTRIBUTE_IS_MANAGED,
      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
      CU_POINTER_ATTRIBUTE_HOST_POINTER,
  };
  /* Zeroed 8-byte slots: the boolean IS_MANAGED may be written narrower
   * than its slot, and "not known" leaves the defaults. */
  unsigned int mem_type = 0;
  unsigned long long managed = 0;
  int ordinal = -2;
  CUdeviceptr dptr = 0;
  void *hptr = NULL;
  void *data[] = {&mem_type, &managed, &ordinal, &dptr, &hptr};
  CUresult r =
      cudaev__drv.cuPointerGetAttributes(sizeof q / sizeof q[0], q, data, (CUdeviceptr)ptr);
  if (r != CUDA_SUCCESS) return cudaev__ret_cu(r);

  struct cudaPointerAttributes a;
  memset(&a, 0, sizeof a);
  if (managed != 0) {
    a.type = cudaMemoryTypeManaged;
  } else if (mem_type == CU_MEMORYTYPE_HOST) {
    a.type = cudaMemoryTypeHost;
  } else if (mem_type == CU_MEMORYTYPE_DEVICE) {
    a.type = cudaMemoryTypeDevice;
  } else {
    a.type = cudaMemoryTypeUnregistered;
  }
  if (a.type == cudaMemoryTypeUnregistered) {
    /* Memory CUDA does not know: no device (cudaInvalidDeviceId), the
     * pointer itself as the host address (the struct's documentation warns
     * that it is not checked), and a device address only where the driver
     * gives one (pageable memory access through the host's page tables). */
    a.device = cudaInvalidDeviceId;
    a.hostPointer = (void *)ptr;
    a.devicePointer = (void *)dptr;
  } else {
    a.device = cudaev__ordinal_of(ordinal);
    a.devicePointer = (void *)dptr;
    a.hostPointer = hptr;
  }
  *attributes = a;
  return cudaSuccess;
}
