// Texture and surface objects: a kernel reads a CUDA array through a
// texture object (point and linear filtering, element and normalized
// reads), a pitch2D and a linear texture, and writes through a surface
// object; the descriptors the getters return; bad input.
#include "common.h"

#include <cuda_runtime.h>

__global__ void tex_to_surf(cudaTextureObject_t t, cudaSurfaceObject_t s, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float v = tex2D<float>(t, x + 0.5f, y + 0.5f);
  surf2Dwrite(v * 2.0f + 1.0f, s, x * (int)sizeof(float), y);
}

__global__ void tex_linear(cudaTextureObject_t t, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float>(t, i * 0.37f + 0.25f, 1.75f);
}

__global__ void tex_norm(cudaTextureObject_t t, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(t, i);
}

__global__ void tex_pitch(cudaTextureObject_t t, int *out, int w, int h) {
  int x = threadIdx.x, y = blockIdx.x;
  if (x < w && y < h) out[y * w + x] = tex2D<int>(t, x, y);
}

static unsigned long long sum(const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  unsigned long long h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Prints what the getters report. borderColor is not printed: the driver
 * does not give it back (NVIDIA's runtime returns stack garbage there), and
 * the view is printed only for a texture created with one (has_view): for
 * the others NVIDIA's runtime copies an unwritten driver struct. */
static void print_tex(cudaTextureObject_t t, bool has_view) {
  cudaTextureDesc d;
  memset(&d, 0x7f, sizeof d);
  cudaError_t e = cudaGetTextureObjectTextureDesc(&d, t);
  printf(
      "texdesc %s: addr %d %d %d filter %d read %d srgb %d norm %d aniso %u mipf %d bias %g clamp "
      "%g %g "
      "notri %d seamless %d\n",
      cudaGetErrorName(e), d.addressMode[0], d.addressMode[1], d.addressMode[2], d.filterMode,
      d.readMode, d.sRGB, d.normalizedCoords, d.maxAnisotropy, d.mipmapFilterMode,
      d.mipmapLevelBias, d.minMipmapLevelClamp, d.maxMipmapLevelClamp,
      d.disableTrilinearOptimization, d.seamlessCubemap);
  cudaResourceDesc r;
  memset(&r, 0, sizeof r);
  e = cudaGetTextureObjectResourceDesc(&r, t);
  printf("resdesc %s: type %d flags %u", cudaGetErrorName(e), r.resType, r.flags);
  if (r.resType == cudaResourceTypeLinear)
    printf(" desc {%d,%d,%d,%d,%d} size %zu", r.res.linear.desc.x, r.res.linear.desc.y,
           r.res.linear.desc.z, r.res.linear.desc.w, r.res.linear.desc.f, r.res.linear.sizeInBytes);
  if (r.resType == cudaResourceTypePitch2D)
    printf(" desc {%d,%d,%d,%d,%d} %zux%zu pitch %zu", r.res.pitch2D.desc.x, r.res.pitch2D.desc.y,
           r.res.pitch2D.desc.z, r.res.pitch2D.desc.w, r.res.pitch2D.desc.f, r.res.pitch2D.width,
           r.res.pitch2D.height, r.res.pitch2D.pitchInBytes);
  printf("\n");
  cudaResourceViewDesc v;
  memset(&v, 0, sizeof v);
  e = cudaGetTextureObjectResourceViewDesc(&v, t);
  if (has_view)
    printf("viewdesc %s: format %d %zux%zux%zu levels %u-%u layers %u-%u\n", cudaGetErrorName(e),
           v.format, v.width, v.height, v.depth, v.firstMipmapLevel, v.lastMipmapLevel,
           v.firstLayer, v.lastLayer);
  else
    printf("viewdesc %s\n", cudaGetErrorName(e));
  cudaGetLastError();
}

int main() {
  CHECK(cudaSetDevice(0));
  const int W = 37, H = 11;
  float *host = (float *)malloc(W * H * sizeof(float));
  for (int i = 0; i < W * H; i++) host[i] = (float)((i * 7) % 23) - 5.0f;

  cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
  cudaArray_t in = NULL, out = NULL;
  CHECK(cudaMallocArray(&in, &fd, W, H, 0));
  CHECK(cudaMallocArray(&out, &fd, W, H, cudaArraySurfaceLoadStore));
  CHECK(cudaMemcpy2DToArray(in, 0, 0, host, W * sizeof(float), W * sizeof(float), H,
                            cudaMemcpyHostToDevice));

  cudaResourceDesc rin;
  memset(&rin, 0, sizeof rin);
  rin.resType = cudaResourceTypeArray;
  rin.res.array.array = in;
  cudaTextureDesc td;
  memset(&td, 0, sizeof td);
  td.addressMode[0] = cudaAddressModeClamp;
  td.addressMode[1] = cudaAddressModeBorder;
  td.filterMode = cudaFilterModePoint;
  td.readMode = cudaReadModeElementType;
  td.borderColor[1] = 0.25f;
  td.maxAnisotropy = 3;
  cudaTextureObject_t t = 0;
  TC(cudaCreateTextureObject(&t, &rin, &td, NULL));
  print_tex(t, false);

  cudaResourceDesc rout;
  memset(&rout, 0, sizeof rout);
  rout.resType = cudaResourceTypeArray;
  rout.res.array.array = out;
  cudaSurfaceObject_t s = 0;
  TC(cudaCreateSurfaceObject(&s, &rout));
  cudaResourceDesc back;
  memset(&back, 0, sizeof back);
  TC(cudaGetSurfaceObjectResourceDesc(&back, s));
  printf("surface resdesc type %d same array %d\n", back.resType, back.res.array.array == out);

  dim3 b(8, 8), g((W + 7) / 8, (H + 7) / 8);
  tex_to_surf<<<g, b>>>(t, s, W, H);
  TC(cudaGetLastError());
  TC(cudaDeviceSynchronize());
  float *res = (float *)malloc(W * H * sizeof(float));
  TC(cudaMemcpy2DFromArray(res, W * sizeof(float), out, 0, 0, W * sizeof(float), H,
                           cudaMemcpyDeviceToHost));
  printf("tex->surf sum %016llx\n", sum(res, W * H * sizeof(float)));

  // linear filtering, normalized coordinates off
  cudaTextureObject_t tl = 0;
  td.filterMode = cudaFilterModeLinear;
  td.normalizedCoords = 0;
  TC(cudaCreateTextureObject(&tl, &rin, &td, NULL));
  print_tex(tl, false);
  float *dout = NULL;
  CHECK(cudaMalloc(&dout, 64 * sizeof(float)));
  tex_linear<<<1, 64>>>(tl, dout, 64);
  TC(cudaDeviceSynchronize());
  float lin[64];
  TC(cudaMemcpy(lin, dout, sizeof lin, cudaMemcpyDeviceToHost));
  printf("linear sum %016llx\n", sum(lin, sizeof lin));

  // a linear resource of uchar4 read as normalized float
  unsigned char *lbuf = NULL;
  CHECK(cudaMalloc(&lbuf, 256));
  unsigned char hb[256];
  for (int i = 0; i < 256; i++) hb[i] = (unsigned char)(i * 3);
  CHECK(cudaMemcpy(lbuf, hb, 256, cudaMemcpyHostToDevice));
  cudaResourceDesc rl;
  memset(&rl, 0, sizeof rl);
  rl.resType = cudaResourceTypeLinear;
  rl.res.linear.devPtr = lbuf;
  rl.res.linear.desc = cudaCreateChannelDesc<unsigned char>();
  rl.res.linear.sizeInBytes = 256;
  cudaTextureDesc tn;
  memset(&tn, 0, sizeof tn);
  tn.readMode = cudaReadModeNormalizedFloat;
  cudaTextureObject_t tnorm = 0;
  TC(cudaCreateTextureObject(&tnorm, &rl, &tn, NULL));
  print_tex(tnorm, false);
  tex_norm<<<1, 64>>>(tnorm, dout, 64);
  TC(cudaDeviceSynchronize());
  TC(cudaMemcpy(lin, dout, sizeof lin, cudaMemcpyDeviceToHost));
  printf("normalized sum %016llx first %g last %g\n", sum(lin, sizeof lin), lin[1], lin[63]);

  // pitch2D of int
  int *pbuf = NULL;
  size_t pitch = 0;
  CHECK(cudaMallocPitch((void **)&pbuf, &pitch, 13 * sizeof(int), 5));
  int hi[13 * 5];
  for (int i = 0; i < 13 * 5; i++) hi[i] = i * i - 40;
  CHECK(
      cudaMemcpy2D(pbuf, pitch, hi, 13 * sizeof(int), 13 * sizeof(int), 5, cudaMemcpyHostToDevice));
  cudaResourceDesc rp;
  memset(&rp, 0, sizeof rp);
  rp.resType = cudaResourceTypePitch2D;
  rp.res.pitch2D.devPtr = pbuf;
  rp.res.pitch2D.desc = cudaCreateChannelDesc<int>();
  rp.res.pitch2D.width = 13;
  rp.res.pitch2D.height = 5;
  rp.res.pitch2D.pitchInBytes = pitch;
  cudaTextureDesc tp;
  memset(&tp, 0, sizeof tp);
  tp.readMode = cudaReadModeElementType;
  tp.sRGB = 0;
  tp.disableTrilinearOptimization = 1;
  cudaTextureObject_t tpo = 0;
  TC(cudaCreateTextureObject(&tpo, &rp, &tp, NULL));
  print_tex(tpo, false);
  int *iout = NULL;
  CHECK(cudaMalloc(&iout, sizeof hi));
  tex_pitch<<<5, 13>>>(tpo, iout, 13, 5);
  TC(cudaDeviceSynchronize());
  int ir[13 * 5];
  TC(cudaMemcpy(ir, iout, sizeof ir, cudaMemcpyDeviceToHost));
  printf("pitch2D int equal %d\n", memcmp(ir, hi, sizeof hi) == 0);

  // resource view on a uint2 array
  cudaArray_t u2 = NULL;
  cudaChannelFormatDesc u2d = cudaCreateChannelDesc<uint2>();
  CHECK(cudaMallocArray(&u2, &u2d, 16, 16, 0));
  cudaResourceDesc ru;
  memset(&ru, 0, sizeof ru);
  ru.resType = cudaResourceTypeArray;
  ru.res.array.array = u2;
  cudaResourceViewDesc vd;
  memset(&vd, 0, sizeof vd);
  vd.format = cudaResViewFormatUnsignedInt2;
  vd.width = 16;
  vd.height = 16;
  cudaTextureObject_t tv = 0;
  memset(&tn, 0, sizeof tn);
  tn.readMode = cudaReadModeElementType;
  TC(cudaCreateTextureObject(&tv, &ru, &tn, &vd));
  print_tex(tv, true);

  // mipmapped array texture
  cudaMipmappedArray_t mm = NULL;
  CHECK(cudaMallocMipmappedArray(&mm, &fd, make_cudaExtent(32, 32, 0), 3, 0));
  cudaResourceDesc rm;
  memset(&rm, 0, sizeof rm);
  rm.resType = cudaResourceTypeMipmappedArray;
  rm.res.mipmap.mipmap = mm;
  cudaTextureDesc tm;
  memset(&tm, 0, sizeof tm);
  tm.normalizedCoords = 1;
  tm.filterMode = cudaFilterModeLinear;
  tm.mipmapFilterMode = cudaFilterModeLinear;
  tm.maxMipmapLevelClamp = 2.0f;
  tm.mipmapLevelBias = 0.5f;
  tm.readMode = cudaReadModeElementType;
  cudaTextureObject_t tmo = 0;
  TC(cudaCreateTextureObject(&tmo, &rm, &tm, NULL));
  print_tex(tmo, false);

  // bad input
  cudaTextureObject_t bad = 0;
  TC(cudaCreateTextureObject(NULL, &rin, &td, NULL));
  TC(cudaCreateTextureObject(&bad, NULL, &td, NULL));
  TC(cudaCreateTextureObject(&bad, &rin, NULL, NULL));
  rl.res.linear.desc = cudaCreateChannelDesc(8, 8, 8, 0, cudaChannelFormatKindUnsigned);
  TC(cudaCreateTextureObject(&bad, &rl, &tn, NULL));
  rl.res.linear.desc = cudaCreateChannelDesc(8, 0, 0, 0, cudaChannelFormatKindNone);
  TC(cudaCreateTextureObject(&bad, &rl, &tn, NULL));
  cudaResourceDesc rbad;
  memset(&rbad, 0, sizeof rbad);
  rbad.resType = (cudaResourceType)9;
  TC(cudaCreateTextureObject(&bad, &rbad, &tn, NULL));
  rbad.resType = cudaResourceTypeArray;
  TC(cudaCreateTextureObject(&bad, &rbad, &tn, NULL));
  TC(cudaCreateSurfaceObject(NULL, &rout));
  TC(cudaCreateSurfaceObject(&s, NULL));
  cudaSurfaceObject_t sbad = 0;
  TC(cudaCreateSurfaceObject(&sbad, &rin));  // array without cudaArraySurfaceLoadStore
  TC(cudaCreateSurfaceObject(&sbad, &rl));   // not an array
  TC(cudaGetTextureObjectTextureDesc(NULL, t));
  TC(cudaGetTextureObjectResourceDesc(NULL, t));
  TC(cudaGetTextureObjectResourceViewDesc(NULL, t));
  TC(cudaGetSurfaceObjectResourceDesc(NULL, s));

  TC(cudaDestroyTextureObject(t));
  TC(cudaDestroyTextureObject(tl));
  TC(cudaDestroyTextureObject(tnorm));
  TC(cudaDestroyTextureObject(tpo));
  TC(cudaDestroyTextureObject(tv));
  TC(cudaDestroyTextureObject(tmo));
  TC(cudaDestroySurfaceObject(s));
  TC(cudaDestroyTextureObject(0));
  TC(cudaDestroySurfaceObject(0));
  CHECK(cudaFreeArray(in));
  CHECK(cudaFreeArray(out));
  CHECK(cudaFreeArray(u2));
  CHECK(cudaFreeMipmappedArray(mm));
  CHECK(cudaFree(dout));
  CHECK(cudaFree(lbuf));
  CHECK(cudaFree(pbuf));
  CHECK(cudaFree(iout));
  free(host);
  free(res);
  TC(cudaDeviceSynchronize());
  return 0;
}
