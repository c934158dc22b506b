/* Texture Object Management: channel descriptors. */
#include "internal.h"

struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w,
                                             enum cudaChannelFormatKind f) {
  struct cudaChannelFormatDesc d = {x, y, z, w, f};
  return d;
}

