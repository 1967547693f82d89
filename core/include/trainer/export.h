/* TR_API: marks a function of libtrainer's public API, the only symbols libtrainer exports.
 *
 *   TR_API tr_status tr_thing_create(tr_thing **out);
 *
 * The core is compiled with -fvisibility=hidden: a function whose declaration lacks TR_API
 * stays inside the library, whatever its name. Every exported name starts with `tr_`
 * (test sdk_exports); plugins reach the core through these functions only (docs/abi.md). */
#ifndef TRAINER_EXPORT_H
#define TRAINER_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define TR_API __attribute__((visibility("default")))
#else
#define TR_API
#endif

#endif
