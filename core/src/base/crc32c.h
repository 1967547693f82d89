/* Private: CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected), the checksum of TFRecord
 * files (run/tfrecord.h). Debian has no C library for it (zlib's crc32 is the IEEE polynomial;
 * crcutil is C++), so it is computed here, checked against RFC 3720's vectors
 * (tests/unit/tfrecord.c). */
#ifndef TRAINER_BASE_CRC32C_H
#define TRAINER_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of n bytes at p, continuing from crc (0 for a new checksum):
 * tr_crc32c(tr_crc32c(0, a, na), b, nb) == tr_crc32c(0, ab, na + nb). */
uint32_t tr_crc32c(uint32_t crc, const void *p, size_t n);

#endif
