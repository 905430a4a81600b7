/* Keys, the dense transform and CRC-32C: the small functions whose exact
 * definitions hps-shard(5) documents, because other tools rely on them. */
#include "data/hps_data.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hps_rng.h"

const char *const hps_data_format_names[] = {"criteo", "libsvm", NULL};
const char *const hps_transform_names[] = {"none", "log", NULL};
const char *const hps_hash_names[] = {"mix64", "none", NULL};

uint64_t hps_key_of(const hps_parse_opts *o, int slot, uint64_t value)
{
    return hps_key_inline(o, slot, value);
}

/* log1p of the small counts that make up most of Criteo's integers. */
#define LOG_TABLE 1024
static float log_table[LOG_TABLE];
static pthread_once_t log_table_once = PTHREAD_ONCE_INIT;

static void log_table_init(void)
{
    for (int i = 0; i < LOG_TABLE; i++) log_table[i] = (float)log1p((double)i);
}

float hps_dense_transform(hps_transform t, double x)
{
    if (t != HPS_TRANSFORM_LOG) return (float)x;
    pthread_once(&log_table_once, log_table_init); /* one table, filled once for both readers */
    double a = x < 0 ? -x : x;
    float y = a < LOG_TABLE && a == (double)(int)a ? log_table[(int)a] : (float)log1p(a);
    return x < 0 ? -y : y;
}

void hps_dense_transform_ints(hps_transform t, const int64_t *x, const int *present, float *out, int n)
{
    if (t != HPS_TRANSFORM_LOG) {
        for (int i = 0; i < n; i++) out[i] = present[i] ? (float)x[i] : 0.0f;
        return;
    }
    pthread_once(&log_table_once, log_table_init); /* one table, filled once for both readers */
    for (int i = 0; i < n; i++) {
        int64_t a = x[i] < 0 ? -x[i] : x[i];
        float y = a < LOG_TABLE ? log_table[a] : (float)log1p((double)a);
        out[i] = !present[i] ? 0.0f : x[i] < 0 ? -y : y;
    }
}

int hps_format_float(char *buf, size_t n, float v)
{
    /* %.9g always reads back exactly; try shorter first so 0.1f prints "0.1". */
    for (int prec = 6; prec <= 9; prec++) {
        int len = snprintf(buf, n, "%.*g", prec, (double)v);
        if (prec == 9 || strtof(buf, NULL) == v) return len;
    }
    return 0;
}

/* ---- CRC-32C -------------------------------------------------------------- */

static uint32_t crc_table[8][256];

static void crc_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        crc_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

/* Slicing-by-8: eight table lookups per 8 bytes, for CPUs without SSE4.2. */
static uint32_t crc32c_soft(uint32_t c, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff], n--;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
            crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
            crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
            crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
    }
    while (n--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t c, const uint8_t *p, size_t n)
{
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
    }
    c = (uint32_t)c64;
    while (n--) c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

uint32_t hps_crc32c(uint32_t crc, const void *data, size_t len)
{
    uint32_t c = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("sse4.2")) return ~crc32c_hw(c, data, len);
#endif
    static pthread_once_t once = PTHREAD_ONCE_INIT; /* readers run on threads */
    pthread_once(&once, crc_table_init);
    return ~crc32c_soft(c, data, len);
}
