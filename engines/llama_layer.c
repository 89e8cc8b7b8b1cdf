/* A Llama decoder layer's step for a few rows, around bf16_linear's products (engines/llama_step.py
 * says why and when).
 *
 * A step of the bundled SmolLM2 at 8 rows spent as long in the small operations between its
 * products (norms, rotary embedding, attention over a few dozen positions, SiLU, residual sums:
 * about 20 torch calls a layer, each a few microseconds of dispatch and thread wake-ups) as in the
 * products themselves. Here they are loops over a few thousand floats. The arithmetic is
 * transformers' (LlamaRMSNorm, rotate_half, softmax attention, SiLU), in float32; only the order
 * of the sums differs (the norms' and attention's), as it differs between torch's kernels.
 *
 * One call a step (llama_layers): per layer, attention_in (norm, q/k/v products, rotary), the new
 * keys and values written into the caller's cache buffers, attention_out (attention, output
 * product, residual, norm, gate/up product, SiLU, down product, residual). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 32

void bf16_linear(const float *x, int64_t rows, int64_t k, const uint16_t *packed, int64_t blocks,
                 float *y, int threads);

typedef float f32x16 __attribute__((vector_size(64)));
typedef int32_t i32x16 __attribute__((vector_size(64)));
typedef uint32_t u32x16 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));

/* the sum of 16 lanes, halving: 4 dependent adds, not 16 */
static float lanes_sum(f32x16 v) {
  f32x8 a, b;
  memcpy(&a, &v, sizeof a);
  memcpy(&b, (char *)&v + sizeof a, sizeof b);
  a += b;
  f32x4 c, d;
  memcpy(&c, &a, sizeof c);
  memcpy(&d, (char *)&a + sizeof c, sizeof d);
  c += d;
  return (c[0] + c[2]) + (c[1] + c[3]);
}

/* exp of 16 floats: 2^n * e^r with r = x - n ln 2, |r| <= ln 2 / 2, e^r by its Taylor series to
 * r^7 (relative error under 2e-7, about a float's rounding; libm's expf one at a time cost as much
 * as the layer's products at 8 rows) */
static f32x16 exp16(f32x16 x) {
  const f32x16 zero = {0}, lo = zero - 87.0f, hi = zero + 88.0f;
  i32x16 under = x < lo, over = x > hi; /* lanes all ones where true (GCC vector comparisons) */
  x = (f32x16)(((i32x16)x & ~(under | over)) | ((i32x16)lo & under) | ((i32x16)hi & over));
  const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  f32x16 n = (x * 1.44269504f + shifter) - shifter;
  f32x16 r = (x - n * 0.693145752f) - n * 1.42860677e-6f; /* ln 2 in two parts */
  f32x16 p = zero + 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  /* 2^n in the exponent field, shifted unsigned (a negative n shifted signed is undefined in C) */
  u32x16 scaled = (u32x16)__builtin_convertvector(n, i32x16) << 23;
  i32x16 bits = (i32x16)p + (i32x16)scaled;
  return (f32x16)bits;
}

/* x[i] = exp(x[i]) */
static void exp_all(float *x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    f32x16 v;
    memcpy(&v, x + i, sizeof v);
    v = exp16(v);
    memcpy(x + i, &v, sizeof v);
  }
  if (i < n) {
    f32x16 v = {0};
    memcpy(&v, x + i, sizeof(float) * (n - i));
    v = exp16(v);
    memcpy(x + i, &v, sizeof(float) * (n - i));
  }
}

/* sum of a[i] * b[i]: 16 lanes of partial sums, then the lanes, then the tail */
static float dot(const float *a, const float *b, int64_t n) {
  f32x16 acc = {0};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    f32x16 x, y;
    memcpy(&x, a + i, sizeof x);
    memcpy(&y, b + i, sizeof y);
    acc += x * y;
  }
  float sum = lanes_sum(acc);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

/* LlamaRMSNorm: weight * (x * rsqrt(mean(x^2) + eps)) */
static void rms_norm(const float *x, const float *weight, float eps, float *out, int64_t rows,
                     int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * width;
    float scale = 1.0f / sqrtf(dot(row, row, width) / (float)width + eps);
    for (int64_t i = 0; i < width; ++i) out[r * width + i] = weight[i] * (row[i] * scale);
  }
}

/* apply_rotary_pos_emb on one head: x * cos + rotate_half(x) * sin */
static void rotate(float *x, const float *cos, const float *sin, int64_t dim) {
  int64_t half = dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    float a = x[i], b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i + half] + a * sin[i + half];
  }
}

/* hidden (rows x width) -> qkv (rows x qkv_blocks*32): the norm, the fused q/k/v product, and the
 * rotary embedding on the query and key heads (cos, sin: rows x dim) */
static void attention_in(int64_t rows, int64_t width, const float *hidden, const float *norm,
                        float eps, const uint16_t *qkv_w, int64_t qkv_blocks, float *qkv,
                        int64_t heads, int64_t kv_heads, int64_t dim, const float *cos,
                        const float *sin, int threads) {
  float *normed = malloc(sizeof(float) * rows * width);
  rms_norm(hidden, norm, eps, normed, rows, width);
  bf16_linear(normed, rows, width, qkv_w, qkv_blocks, qkv, threads);
  free(normed);
  int64_t stride = qkv_blocks * BLOCK;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads + kv_heads; ++h)
      rotate(qkv + r * stride + h * dim, cos + r * dim, sin + r * dim, dim);
}

/* softmax(q . k^T * scale) . v for one query head over its key head's first `length` positions;
 * positions where mask is 0 take no part. keys, values: that head's rows of the cache (length x
 * dim, row-major); scores: room for `length` floats. */
static void attend(const float *q, const float *keys, const float *values, const uint8_t *mask,
                   int64_t length, int64_t dim, float scale, float *scores, float *out) {
  float top = -INFINITY;
  for (int64_t t = 0; t < length; ++t) {
    if (mask && !mask[t]) continue;
    scores[t] = dot(q, keys + t * dim, dim) * scale;
    if (scores[t] > top) top = scores[t];
  }
  for (int64_t t = 0; t < length; ++t) scores[t] = mask && !mask[t] ? -INFINITY : scores[t] - top;
  exp_all(scores, length);
  float total = 0.0f;
  for (int64_t i = 0; i < dim; ++i) out[i] = 0.0f;
  for (int64_t t = 0; t < length; ++t) {
    if (mask && !mask[t]) continue;
    float p = scores[t];
    total += p;
    const float *v = values + t * dim;
    for (int64_t i = 0; i < dim; ++i) out[i] += p * v[i];
  }
  for (int64_t i = 0; i < dim; ++i) out[i] /= total;
}

/* The rest of the layer, hidden updated in place: attention of the queries in qkv over the cache
 * (keys, values: rows x kv_heads x capacity x dim, the first `length` positions filled, the new
 * token's included; mask: rows x length, 1 where a row attends, or NULL for all), the output
 * product and residual, the norm, the fused gate/up product, SiLU(gate) * up, the down product and
 * residual. */
static void attention_out(int64_t rows, int64_t width, float *hidden, const float *qkv,
                         int64_t qkv_blocks, const float *keys, const float *values,
                         int64_t capacity, int64_t length, const uint8_t *mask, float scale,
                         int64_t heads, int64_t kv_heads, int64_t dim, const uint16_t *out_w,
                         int64_t out_blocks, const float *norm, float eps, const uint16_t *gate_up_w,
                         int64_t gate_up_blocks, int64_t intermediate, const uint16_t *down_w,
                         int64_t down_blocks, int threads) {
  int64_t group = heads / kv_heads, stride = qkv_blocks * BLOCK;
  float *attended = malloc(sizeof(float) * rows * heads * dim);
  float *scores = malloc(sizeof(float) * rows * heads * length);
#pragma omp parallel for collapse(2) num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t g = h / group; /* transformers' repeat_kv: a key head serves `group` query heads */
      const float *k = keys + (r * kv_heads + g) * capacity * dim;
      const float *v = values + (r * kv_heads + g) * capacity * dim;
      attend(qkv + r * stride + h * dim, k, v, mask ? mask + r * length : NULL, length, dim, scale,
             scores + (r * heads + h) * length, attended + (r * heads + h) * dim);
    }
  free(scores);

  int64_t widest = out_blocks > gate_up_blocks ? out_blocks : gate_up_blocks;
  if (down_blocks > widest) widest = down_blocks;
  float *product = malloc(sizeof(float) * rows * widest * BLOCK);
  bf16_linear(attended, rows, heads * dim, out_w, out_blocks, product, threads);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < width; ++i) hidden[r * width + i] += product[r * out_blocks * BLOCK + i];
  free(attended);

  float *normed = malloc(sizeof(float) * rows * width);
  rms_norm(hidden, norm, eps, normed, rows, width);
  bf16_linear(normed, rows, width, gate_up_w, gate_up_blocks, product, threads);
  free(normed);
  float *gated = malloc(sizeof(float) * rows * intermediate);
  for (int64_t r = 0; r < rows; ++r) {
    const float *gate = product + r * gate_up_blocks * BLOCK, *up = gate + intermediate;
    float *out = gated + r * intermediate;
    for (int64_t i = 0; i < intermediate; ++i) out[i] = -gate[i];
    exp_all(out, intermediate);
    for (int64_t i = 0; i < intermediate; ++i) out[i] = gate[i] / (1.0f + out[i]) * up[i];
  }
  bf16_linear(gated, rows, intermediate, down_w, down_blocks, product, threads);
  free(gated);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < width; ++i) hidden[r * width + i] += product[r * down_blocks * BLOCK + i];
  free(product);
}

/* a layer's weights and constants (engines/llama_step.py fills one per layer, once) */
typedef struct {
  const float *norm_in, *norm_mlp;
  const uint16_t *qkv, *out, *gate_up, *down; /* packed, bf16_linear's layout */
  int64_t qkv_blocks, out_blocks, gate_up_blocks, down_blocks;
  float eps_in, eps_mlp, scale;
} llama_layer_t;

/* One decoding step through every layer: hidden (rows x width, the new tokens' embeddings) updated
 * in place to the last layer's output. keys[l], values[l]: layer l's cache buffers, rows x kv_heads
 * x capacity[l] x dim, the first `length` positions filled; this step's keys and values are
 * written at position `length`. mask: rows x (length + 1), 1 where a row attends, or NULL. */
void llama_layers(int64_t rows, int64_t width, float *hidden, const llama_layer_t *layers,
                  int64_t count, int64_t heads, int64_t kv_heads, int64_t dim, int64_t intermediate,
                  const float *cos, const float *sin, float *const *keys, float *const *values,
                  const int64_t *capacity, int64_t length, const uint8_t *mask, int threads) {
  int64_t widest = 0;
  for (int64_t l = 0; l < count; ++l)
    if (layers[l].qkv_blocks > widest) widest = layers[l].qkv_blocks;
  float *qkv = malloc(sizeof(float) * rows * widest * BLOCK);
  for (int64_t l = 0; l < count; ++l) {
    const llama_layer_t *layer = layers + l;
    int64_t stride = layer->qkv_blocks * BLOCK;
    attention_in(rows, width, hidden, layer->norm_in, layer->eps_in, layer->qkv, layer->qkv_blocks,
                 qkv, heads, kv_heads, dim, cos, sin, threads);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < kv_heads; ++g) {
        int64_t at = ((r * kv_heads + g) * capacity[l] + length) * dim;
        memcpy(keys[l] + at, qkv + r * stride + (heads + g) * dim, sizeof(float) * dim);
        memcpy(values[l] + at, qkv + r * stride + (heads + kv_heads + g) * dim, sizeof(float) * dim);
      }
    attention_out(rows, width, hidden, qkv, layer->qkv_blocks, keys[l], values[l], capacity[l],
                  length + 1, mask, layer->scale, heads, kv_heads, dim, layer->out,
                  layer->out_blocks, layer->norm_mlp, layer->eps_mlp, layer->gate_up,
                  layer->gate_up_blocks, intermediate, layer->down, layer->down_blocks, threads);
  }
  free(qkv);
}
