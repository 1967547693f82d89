/* Private: this thread's info (and debug, trace) lines dropped for a while, warnings and
 * errors kept: the model factory mutes what a model says when it is built again for another
 * replica or rank (its first replica said it). */
#ifndef TR_BASE_LOG_MUTE_H
#define TR_BASE_LOG_MUTE_H

void log_mute_info(int mute);

#endif
