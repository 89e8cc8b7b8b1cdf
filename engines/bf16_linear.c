/* y = x . W^T in float32, W held as bfloat16 (engines/packed_linear.py says why and when).
 *
 * x: rows x k float32, row-major. W: packed by packed_linear.pack as blocks of 32 output columns,
 * each block k x 32 bfloat16 (a block's 32 weights of one input position lie together, so a
 * block is read front to back once for every 8 rows of x; see widen for their order within).
 * y: rows x (blocks * 32), row-major.
 *
 * A bfloat16 is the top half of a float32: widening is a shift, exact. Every output is one float32
 * sum over k in order, so the values are float32 products of the same weights, rounded as a
 * float32 matrix product rounds (the order of its sum differs from MKL's, as MKL's own differs
 * between batch sizes).
 *
 * GCC's vector extensions rather than intrinsics: the same source builds for AVX-512 (one
 * register a vector), AVX2 (two) or another CPU; built with -march=native on the machine. */
#include <stdint.h>
#include <string.h>

typedef float f32x16 __attribute__((vector_size(64)));
typedef uint32_t u32x16 __attribute__((vector_size(64)));

#define BLOCK 32

/* One input position's 32 weights of a block: packed so that 32-bit lane j holds column j in its
 * low half and column j + 16 in its high half (little-endian), so one load and two bit operations
 * give both as float32 vectors, with no widening instruction. */
static inline void widen(const uint16_t *p, f32x16 *lo, f32x16 *hi) {
  u32x16 w;
  memcpy(&w, p, sizeof w); /* unaligned load */
  *lo = (f32x16)(w << 16);
  *hi = (f32x16)(w & 0xFFFF0000u);
}

/* ROWS rows of x against one block: 2 x ROWS accumulators of 16 lanes (16 at 8 rows: the
 * register file of AVX-512 holds them with the two weight vectors). */
#define ROWS_KERNEL(ROWS)                                                                        \
  static void rows_##ROWS(const float *x, int64_t k, const uint16_t *w, float *y, int64_t ldy) { \
    f32x16 lo[ROWS], hi[ROWS];                                                                   \
    for (int r = 0; r < ROWS; ++r) lo[r] = hi[r] = (f32x16){0};                                  \
    for (int64_t i = 0; i < k; ++i) {                                                            \
      f32x16 a, b;                                                                               \
      __builtin_prefetch(w + (i + 32) * BLOCK); /* 2 KB ahead: the stream starts sooner */      \
      widen(w + i * BLOCK, &a, &b);                                                              \
      for (int r = 0; r < ROWS; ++r) {                                                           \
        float v = x[r * k + i];                                                                  \
        lo[r] += a * v;                                                                          \
        hi[r] += b * v;                                                                          \
      }                                                                                          \
    }                                                                                            \
    for (int r = 0; r < ROWS; ++r) {                                                             \
      memcpy(y + r * ldy, &lo[r], sizeof lo[r]);                                                 \
      memcpy(y + r * ldy + 16, &hi[r], sizeof hi[r]);                                            \
    }                                                                                            \
  }

ROWS_KERNEL(8)
ROWS_KERNEL(4)
ROWS_KERNEL(2)
ROWS_KERNEL(1)

void bf16_linear(const float *x, int64_t rows, int64_t k, const uint16_t *packed, int64_t blocks,
                 float *y, int threads) {
  int64_t ldy = blocks * BLOCK;
  /* over blocks: each thread streams its own share of the weights once */
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const uint16_t *w = packed + b * k * BLOCK;
    float *out = y + b * BLOCK;
    int64_t r = 0;
    for (; r + 8 <= rows; r += 8) rows_8(x + r * k, k, w, out + r * ldy, ldy);
    for (; r + 4 <= rows; r += 4) rows_4(x + r * k, k, w, out + r * ldy, ldy);
    for (; r + 2 <= rows; r += 2) rows_2(x + r * k, k, w, out + r * ldy, ldy);
    for (; r < rows; ++r) rows_1(x + r * k, k, w, out + r * ldy, ldy);
  }
}
