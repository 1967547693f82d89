/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
 * Element i of a stream is lane i % 4 of the block at counter (stream, i / 4) under key seed. */
#include <math.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "trainer/rng.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void tr_philox4x32(uint32_t out[4], uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
    uint32_t c0 = (uint32_t)counter_lo, c1 = (uint32_t)(counter_lo >> 32);
    uint32_t c2 = (uint32_t)counter_hi, c3 = (uint32_t)(counter_hi >> 32);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* Blocks of 16 counters side by side (lane j of each word array is block j), so the rounds
 * vectorise: the 32 x 32 -> 64-bit products map onto vpmuludq. The same rounds as above, word
 * for word, so a block comes out the same either way (tests/unit/base.c). */
#define PHILOX_LANES 16

#if defined(__AVX512F__)
/* 16 blocks in two vectors of 8 64-bit lanes per word, each word in a lane's low half.
 * vpmuludq (_mm512_mul_epu32) multiplies the low halves, 32 x 32 -> 64 bits, exactly the
 * round's product; written as C, gcc chose vpmullq (the full 64 x 64 product, 3 uops and
 * 15 cycles), and the rounds ran at 2.4 ns an element of a dropout mask. Words are not masked
 * back to 32 bits between rounds: the high halves only ever reach a high half (the products
 * read low halves, the XORs are lane-wise, the output takes low halves). */
static void philox_lanes(uint32_t *out, uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
    const __m512i m0 = _mm512_set1_epi64(PHILOX_M0), m1 = _mm512_set1_epi64(PHILOX_M1);
    __m512i c0[2], c1[2], c2[2], c3[2];
    for (int h = 0; h < 2; h++) {
        __m512i lo = _mm512_add_epi64(_mm512_set1_epi64((long long)counter_lo),
                                      _mm512_setr_epi64(8 * h, 8 * h + 1, 8 * h + 2, 8 * h + 3, 8 * h + 4, 8 * h + 5,
                                                        8 * h + 6, 8 * h + 7));
        c0[h] = lo;
        c1[h] = _mm512_srli_epi64(lo, 32);
        c2[h] = _mm512_set1_epi64((long long)(counter_hi & 0xffffffffu));
        c3[h] = _mm512_set1_epi64((long long)(counter_hi >> 32));
    }
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        __m512i vk0 = _mm512_set1_epi64(k0), vk1 = _mm512_set1_epi64(k1);
        for (int h = 0; h < 2; h++) {
            __m512i p0 = _mm512_mul_epu32(c0[h], m0), p1 = _mm512_mul_epu32(c2[h], m1);
            c0[h] = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(p1, 32), c1[h]), vk0);
            c2[h] = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(p0, 32), c3[h]), vk1);
            c1[h] = p1;
            c3[h] = p0;
        }
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    /* out[4 j + w] = word w of block j: pairs (w 0, 1) and (2, 3) in 64-bit lanes, then the
     * two pairs of each block side by side, blocks in order. */
    const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    for (int h = 0; h < 2; h++) {
        __m512i w01 = _mm512_mask_blend_epi32((__mmask16)0xAAAA, c0[h], _mm512_slli_epi64(c1[h], 32));
        __m512i w23 = _mm512_mask_blend_epi32((__mmask16)0xAAAA, c2[h], _mm512_slli_epi64(c3[h], 32));
        __m512i even = _mm512_unpacklo_epi64(w01, w23), odd = _mm512_unpackhi_epi64(w01, w23);
        _mm512_storeu_si512((void *)(out + 32 * h), _mm512_permutex2var_epi64(even, first, odd));
        _mm512_storeu_si512((void *)(out + 32 * h + 16), _mm512_permutex2var_epi64(even, second, odd));
    }
}
#else
static void philox_lanes(uint32_t *out, uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
    /* 64-bit lanes holding 32-bit words: a product of two masked words is one vpmuludq. */
    uint64_t c0[PHILOX_LANES], c1[PHILOX_LANES], c2[PHILOX_LANES], c3[PHILOX_LANES];
    for (int j = 0; j < PHILOX_LANES; j++) {
        uint64_t lo = counter_lo + (uint64_t)j;
        c0[j] = lo & 0xffffffffu;
        c1[j] = lo >> 32;
        c2[j] = counter_hi & 0xffffffffu;
        c3[j] = counter_hi >> 32;
    }
    uint64_t k0 = key & 0xffffffffu, k1 = key >> 32;
    for (int r = 0; r < 10; r++) {
#pragma omp simd
        for (int j = 0; j < PHILOX_LANES; j++) {
            uint64_t p0 = (c0[j] & 0xffffffffu) * PHILOX_M0;
            uint64_t p1 = (c2[j] & 0xffffffffu) * PHILOX_M1;
            c0[j] = (p1 >> 32) ^ c1[j] ^ k0;
            c2[j] = (p0 >> 32) ^ c3[j] ^ k1;
            c1[j] = p1 & 0xffffffffu;
            c3[j] = p0 & 0xffffffffu;
        }
        k0 = (k0 + PHILOX_W0) & 0xffffffffu;
        k1 = (k1 + PHILOX_W1) & 0xffffffffu;
    }
    for (int j = 0; j < PHILOX_LANES; j++) {
        out[4 * j] = (uint32_t)c0[j];
        out[4 * j + 1] = (uint32_t)c1[j];
        out[4 * j + 2] = (uint32_t)c2[j];
        out[4 * j + 3] = (uint32_t)c3[j];
    }
}
#endif

void tr_philox4x32_blocks(uint32_t *out, size_t nblocks, uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
    size_t b = 0;
    for (; b + PHILOX_LANES <= nblocks; b += PHILOX_LANES) philox_lanes(out + 4 * b, key, counter_hi, counter_lo + b);
    for (; b < nblocks; b++) tr_philox4x32(out + 4 * b, key, counter_hi, counter_lo + b);
}

/* splitmix64 finaliser: mixes sub-stream ids so nearby (a, b) pairs are unrelated. */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

uint64_t tr_rng_stream(uint64_t stream, uint64_t a, uint64_t b) {
    return mix64(mix64(mix64(stream) ^ a) ^ (b + 0x9E3779B97F4A7C15ull));
}

uint32_t tr_rng_u32(uint64_t seed, uint64_t stream, uint64_t index) {
    uint32_t r[4];
    tr_philox4x32(r, seed, stream, index >> 2);
    return r[index & 3];
}

static float u32_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

float tr_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    return u32_to_unit(tr_rng_u32(seed, stream, index));
}

void tr_rng_fill_uniform(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t first,
                         float lo, float hi) {
    float span = hi - lo;
    size_t i = 0;
    while (i < n) {
        uint64_t idx = first + i;
        uint32_t r[4];
        tr_philox4x32(r, seed, stream, idx >> 2);
        for (unsigned lane = (unsigned)(idx & 3); lane < 4 && i < n; lane++, i++)
            out[i] = lo + span * u32_to_unit(r[lane]);
    }
}

void tr_rng_fill_normal(float *out, size_t n, uint64_t seed, uint64_t stream, uint64_t first,
                        float mean, float std) {
    /* Element e uses the pair (2*(e/2), 2*(e/2)+1) of uniforms; even e takes the cosine branch,
     * odd e the sine branch, so any element is computable on its own. */
    for (size_t i = 0; i < n; i++) {
        uint64_t e = first + i;
        uint64_t base = (e & ~1ull) * 2;
        uint32_t r[4];
        tr_philox4x32(r, seed, stream, base >> 2);
        double u1 = ((double)r[0] + 1.0) / 4294967296.0; /* (0, 1] */
        double u2 = (double)r[1] / 4294967296.0;
        double rad = sqrt(-2.0 * log(u1));
        double th = 6.283185307179586 * u2;
        double z = (e & 1) ? rad * sin(th) : rad * cos(th);
        out[i] = mean + std * (float)z;
    }
}
