/* Private: TFRecord framing, the container of TensorBoard's event files. Each record is
 *
 *   uint64 length (little-endian) | uint32 masked_crc32c(length's 8 bytes) |
 *   data[length]                  | uint32 masked_crc32c(data)
 *
 * where masked_crc32c(x) = rotate_right(crc32c(x), 15) + 0xa282ead8 (TensorFlow's
 * core/lib/hash/crc32c.h), so that a CRC of data holding CRCs stays useful. */
#ifndef TRAINER_RUN_TFRECORD_H
#define TRAINER_RUN_TFRECORD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { TFRECORD_HEAD = 12, TFRECORD_TAIL = 4 };

uint32_t tfrecord_masked_crc(const void *p, size_t n);
/* The framing of n bytes of data: head (length and its CRC) and tail (the data's CRC). */
void tfrecord_frame(const void *data, uint64_t n, unsigned char head[TFRECORD_HEAD], unsigned char tail[TFRECORD_TAIL]);
/* Writes one record to f (buffered; the caller flushes). 0, or -1 with errno set. */
int tfrecord_write(FILE *f, const void *data, size_t n);

#endif
