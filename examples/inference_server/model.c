/* The MLP on the CPU: dims, deterministic weights, the weights file and the
 * reference forward pass (model.h has the layout and the file format). */
#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char magic[8] = {'C', 'E', 'V', 'M', 'L', 'P', '0', '1'};

int model_parse_dims(struct model *m, const char *list, char *err, size_t errlen) {
  int n = 0;
  const char *p = list;
  while (*p) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < 1 || v > MODEL_MAX_DIM || (*end && *end != ',')) {
      snprintf(err, errlen, "--layers: '%s': want 3 or 4 sizes 1..%d separated by commas", list,
               MODEL_MAX_DIM);
      return -1;
    }
    if (n == MODEL_MAX_LAYERS + 1) {
      snprintf(err, errlen, "--layers: '%s': at most %d layers (%d sizes)", list, MODEL_MAX_LAYERS,
               MODEL_MAX_LAYERS + 1);
      return -1;
    }
    m->dims[n++] = (int)v;
    p = *end ? end + 1 : end;
  }
  if (n < 3) {
    snprintf(err, errlen, "--layers: '%s': want 2 or 3 layers (3 or 4 sizes)", list);
    return -1;
  }
  m->nlayers = n - 1;
  return 0;
}

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1), from the top 24 bits: exact in float. */
static float uniform(uint64_t *s) {
  return (float)((double)(splitmix64(s) >> 40) / (double)(1u << 23) - 1.0);
}

static int alloc_layers(struct model *m) {
  for (int l = 0; l < m->nlayers; l++) {
    m->w[l] = malloc(sizeof(float) * (size_t)m->dims[l] * (size_t)m->dims[l + 1]);
    m->b[l] = malloc(sizeof(float) * (size_t)m->dims[l + 1]);
    if (!m->w[l] || !m->b[l]) return -1;
  }
  return 0;
}

int model_generate(struct model *m, uint64_t seed) {
  if (alloc_layers(m) != 0) return -1;
  uint64_t s = seed;
  m->seed = seed;
  for (int l = 0; l < m->nlayers; l++) {
    size_t k = (size_t)m->dims[l], n = (size_t)m->dims[l + 1];
    /* Glorot: activations keep their scale through the layers, so fp32
     * results stay well inside the range where a relative error means
     * something. */
    float scale = (float)sqrt(6.0 / (double)(k + n));
    for (size_t i = 0; i < k * n; i++) m->w[l][i] = uniform(&s) * scale;
    for (size_t i = 0; i < n; i++) m->b[l][i] = uniform(&s) * 0.1f;
  }
  return 0;
}

uint32_t model_crc32(uint32_t crc, const void *data, size_t len) {
  static uint32_t table[256];
  if (table[1] == 0) {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
  }
  const unsigned char *p = data;
  crc = ~crc;
  while (len--) crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

/* Reads exactly len bytes and folds them into the CRC. */
static int rd(FILE *f, void *p, size_t len, uint32_t *crc) {
  if (fread(p, 1, len, f) != len) return -1;
  *crc = model_crc32(*crc, p, len);
  return 0;
}

static int wr(FILE *f, const void *p, size_t len, uint32_t *crc) {
  if (fwrite(p, 1, len, f) != len) return -1;
  *crc = model_crc32(*crc, p, len);
  return 0;
}

int model_load(struct model *m, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    int e = errno;
    snprintf(err, errlen, "%s: %s", path, strerror(e));
    errno = e;
    return -1;
  }
  struct model got = {0};
  uint32_t crc = 0, nl, dims[MODEL_MAX_LAYERS + 1], want_crc;
  char mg[8];
  const char *why = "truncated";
  if (rd(f, mg, 8, &crc) || rd(f, &nl, 4, &crc)) goto bad;
  why = "not a weights file (magic)";
  if (memcmp(mg, magic, 8) != 0) goto bad;
  why = "bad layer count";
  if (nl < 2 || nl > MODEL_MAX_LAYERS) goto bad;
  why = "truncated";
  if (rd(f, dims, 4 * (nl + 1), &crc) || rd(f, &got.seed, 8, &crc)) goto bad;
  got.nlayers = (int)nl;
  for (uint32_t i = 0; i <= nl; i++) {
    why = "bad size";
    if (dims[i] < 1 || dims[i] > MODEL_MAX_DIM) goto bad;
    got.dims[i] = (int)dims[i];
  }
  why = "its layers differ from --layers";
  if (m->nlayers &&
      (m->nlayers != got.nlayers || memcmp(m->dims, got.dims, sizeof(int) * (size_t)(nl + 1)) != 0))
    goto bad;
  why = "out of memory";
  if (alloc_layers(&got) != 0) goto bad;
  why = "truncated";
  for (int l = 0; l < got.nlayers; l++) {
    if (rd(f, got.w[l], sizeof(float) * (size_t)got.dims[l] * (size_t)got.dims[l + 1], &crc) ||
        rd(f, got.b[l], sizeof(float) * (size_t)got.dims[l + 1], &crc))
      goto bad;
  }
  if (fread(&want_crc, 4, 1, f) != 1) goto bad;
  why = "CRC mismatch";
  if (want_crc != crc) goto bad;
  why = "trailing bytes";
  if (fgetc(f) != EOF) goto bad;
  fclose(f);
  model_free(m);
  *m = got;
  return 0;
bad:
  fclose(f);
  model_free(&got);
  snprintf(err, errlen, "%s: %s", path, why);
  errno = EINVAL;
  return -1;
}

int model_save(const struct model *m, const char *path, char *err, size_t errlen) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
    snprintf(err, errlen, "%s: path too long", path);
    return -1;
  }
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
    return -1;
  }
  uint32_t crc = 0, nl = (uint32_t)m->nlayers, dims[MODEL_MAX_LAYERS + 1];
  for (int i = 0; i <= m->nlayers; i++) dims[i] = (uint32_t)m->dims[i];
  int bad = wr(f, magic, 8, &crc) || wr(f, &nl, 4, &crc) || wr(f, dims, 4 * (nl + 1), &crc) ||
            wr(f, &m->seed, 8, &crc);
  for (int l = 0; !bad && l < m->nlayers; l++) {
    bad = wr(f, m->w[l], sizeof(float) * (size_t)m->dims[l] * (size_t)m->dims[l + 1], &crc) ||
          wr(f, m->b[l], sizeof(float) * (size_t)m->dims[l + 1], &crc);
  }
  bad = bad || fwrite(&crc, 4, 1, f) != 1;
  bad = fclose(f) != 0 || bad;
  if (bad || rename(tmp, path) != 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno ? errno : EIO));
    remove(tmp);
    return -1;
  }
  return 0;
}

int model_max_width(const struct model *m) {
  int w = 0;
  for (int i = 0; i <= m->nlayers; i++) w = m->dims[i] > w ? m->dims[i] : w;
  return w;
}

size_t model_params(const struct model *m) {
  size_t p = 0;
  for (int l = 0; l < m->nlayers; l++)
    p += (size_t)m->dims[l] * (size_t)m->dims[l + 1] + (size_t)m->dims[l + 1];
  return p;
}

void model_forward(const struct model *m, const float *in, float *out, int n, double *scratch) {
  int width = model_max_width(m);
  for (int r = 0; r < n; r++) {
    double *x = scratch, *acc = scratch + width;
    for (int i = 0; i < m->dims[0]; i++) x[i] = in[(size_t)r * (size_t)m->dims[0] + i];
    for (int l = 0; l < m->nlayers; l++) {
      int k = m->dims[l], nn = m->dims[l + 1], last = l == m->nlayers - 1;
      for (int j = 0; j < nn; j++) acc[j] = m->b[l][j];
      /* Row by row through W: the inner loop walks memory in order. */
      for (int i = 0; i < k; i++) {
        const float *w = m->w[l] + (size_t)i * (size_t)nn;
        double xi = x[i];
        for (int j = 0; j < nn; j++) acc[j] += xi * (double)w[j];
      }
      for (int j = 0; j < nn; j++) acc[j] = (float)(last || acc[j] > 0 ? acc[j] : 0);
      double *t = x;
      x = acc;
      acc = t;
    }
    for (int j = 0; j < m->dims[m->nlayers]; j++)
      out[(size_t)r * (size_t)m->dims[m->nlayers] + j] = (float)x[j];
  }
}

void model_free(struct model *m) {
  for (int l = 0; l < MODEL_MAX_LAYERS; l++) {
    free(m->w[l]);
    free(m->b[l]);
    m->w[l] = m->b[l] = NULL;
  }
}
