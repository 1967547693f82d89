/* TFRecord framing (tfrecord.h) over the CRC-32C of base/crc32c.h. */
#include "run/tfrecord.h"

#include <errno.h>

#include "base/crc32c.h"

uint32_t tfrecord_masked_crc(const void *p, size_t n) {
    uint32_t c = tr_crc32c(0, p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le(unsigned char *out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) out[i] = (unsigned char)(v >> (8 * i));
}

void tfrecord_frame(const void *data, uint64_t n, unsigned char head[TFRECORD_HEAD], unsigned char tail[TFRECORD_TAIL]) {
    put_le(head, n, 8);
    put_le(head + 8, tfrecord_masked_crc(head, 8), 4);
    put_le(tail, tfrecord_masked_crc(data, (size_t)n), 4);
}

int tfrecord_write(FILE *f, const void *data, size_t n) {
    unsigned char head[TFRECORD_HEAD], tail[TFRECORD_TAIL];
    tfrecord_frame(data, n, head, tail);
    errno = 0;
    if (fwrite(head, 1, sizeof head, f) != sizeof head || (n && fwrite(data, 1, n, f) != n) ||
        fwrite(tail, 1, sizeof tail, f) != sizeof tail) {
        if (!errno) errno = EIO;
        return -1;
    }
    return 0;
}
