/* bench/: a header-based tracking allocator, the common home-made
 * alternative to tags: every block carries a 16-byte header holding its tag
 * and size, and per-tag live-byte counters are updated atomically. It sits
 * on jemalloc's own malloc/free/realloc (bench_je), as a wrapper library
 * over the system allocator would. Small and honest: no caching tricks. */
#ifndef BENCH_TRACKER_H
#define BENCH_TRACKER_H

#include <stddef.h>

#define TRACKER_MAX_TAGS 256 /* tag ids 0 (untagged) .. TRACKER_MAX_TAGS-1 */
#define TRACKER_STACK_MAX 64

/* Thread-local tag stack, like ra_tag_push/ra_tag_pop: 0, or -1 when the
 * tag is out of range, the stack is full, or tag is not on top. */
int tracker_push(unsigned tag);
int tracker_pop(unsigned tag);

/* malloc/free/realloc semantics; blocks belong to the tag on top of the
 * calling thread's stack (realloc keeps the block's tag). NULL on failure. */
void *tracker_malloc(size_t size);
void tracker_free(void *ptr);
void *tracker_realloc(void *ptr, size_t size);

/* The block's tag, read from its header. */
unsigned tracker_tag_of(const void *ptr);
/* Bytes requested by the live blocks of tag. */
size_t tracker_live_bytes(unsigned tag);

#endif /* BENCH_TRACKER_H */
