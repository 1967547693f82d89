/* CRC-32C a bit at a time (crc32c.h): metrics records are a few hundred bytes a step, so a
 * table or the SSE4.2 instruction would buy nothing measurable, and this keeps no state. */
#include "base/crc32c.h"

uint32_t tr_crc32c(uint32_t crc, const void *p, size_t n) {
    const unsigned char *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= b[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
    }
    return ~crc;
}
