/* CRC-32C and TFRecord framing (base/crc32c.h, run/tfrecord.h) against known vectors: RFC 3720's
 * CRC-32C test patterns, the check value of "123456789", and records framed by TensorBoard's own
 * writer (tensorboard 2.19's RecordWriter, bytes pasted below). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "check.h"
#include "run/tfrecord.h"

/* "0a1b..." into bytes; their count. */
static size_t unhex(const char *hex, unsigned char *out) {
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (unsigned char)v;
    }
    return n;
}

static void check_crc(void) {
    unsigned char b[32];
    memset(b, 0, sizeof b);
    CHECK(tr_crc32c(0, b, 32) == 0x8A9136AAu, "32 zero bytes: %08x, expected 8a9136aa", tr_crc32c(0, b, 32));
    memset(b, 0xFF, sizeof b);
    CHECK(tr_crc32c(0, b, 32) == 0x62A8AB43u, "32 0xff bytes: %08x, expected 62a8ab43", tr_crc32c(0, b, 32));
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)i;
    CHECK(tr_crc32c(0, b, 32) == 0x46DD794Eu, "bytes 0..31: %08x, expected 46dd794e", tr_crc32c(0, b, 32));
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)(31 - i);
    CHECK(tr_crc32c(0, b, 32) == 0x113FDB5Cu, "bytes 31..0: %08x, expected 113fdb5c", tr_crc32c(0, b, 32));
    CHECK(tr_crc32c(0, "123456789", 9) == 0xE3069283u, "\"123456789\": %08x, expected e3069283",
          tr_crc32c(0, "123456789", 9));
    CHECK(tr_crc32c(tr_crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u, "continued over two calls");
    CHECK(tr_crc32c(0, "", 0) == 0, "empty: 0");
    /* tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c(b"123456789") */
    CHECK(tfrecord_masked_crc("123456789", 9) == 0xC78AB0E5u, "masked: %08x, expected c78ab0e5",
          tfrecord_masked_crc("123456789", 9));
}

/* The framing of data (hex) must be TensorBoard's bytes (hex), in memory and through a file. */
static void check_frame(const char *name, const char *data_hex, const char *want_hex) {
    unsigned char data[256], want[300], head[TFRECORD_HEAD], tail[TFRECORD_TAIL];
    size_t n = unhex(data_hex, data), nw = unhex(want_hex, want);
    CHECK(nw == n + TFRECORD_HEAD + TFRECORD_TAIL, "%s: vector of %zu bytes for %zu of data", name, nw, n);
    tfrecord_frame(data, n, head, tail);
    CHECK(memcmp(head, want, TFRECORD_HEAD) == 0, "%s: length and its CRC differ from TensorBoard's", name);
    CHECK(memcmp(tail, want + TFRECORD_HEAD + n, TFRECORD_TAIL) == 0, "%s: the data's CRC differs from TensorBoard's", name);
    char path[] = "/tmp/trainer-tfrecord-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w+b") : NULL;
    CHECK(f != NULL, "temporary file");
    if (!f) return;
    CHECK(tfrecord_write(f, data, n) == 0, "%s: written", name);
    rewind(f);
    unsigned char got[300];
    size_t ng = fread(got, 1, sizeof got, f);
    CHECK(ng == nw && memcmp(got, want, nw) == 0, "%s: the file holds %zu bytes, not TensorBoard's %zu", name, ng, nw);
    fclose(f);
    unlink(path);
}

int main(void) {
    check_crc();
    /* RecordWriter(f).write(b"hello") */
    check_frame("hello", "68656c6c6f", "0500000000000000eab2043e68656c6c6fbb1f1c19");
    /* Event(wall_time=1.5, step=0, file_version="brain.Event:2"), serialized by TensorBoard */
    check_frame("file_version event", "09000000000000f83f1a0d627261696e2e4576656e743a32",
                "1800000000000000a37f4b2209000000000000f83f1a0d627261696e2e4576656e743a322a28646c");
    /* RecordWriter(f).write(b"") */
    check_frame("empty record", "", "000000000000000029039807d8ea82a2");
    return test_finish();
}
