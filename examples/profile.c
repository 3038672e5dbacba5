/* Demo: the sampled allocation-site profiler on indexer-style phases, with
 * a folded-stacks file to turn into a flamegraph.
 *
 *   read      generated "documents", one buffer each            tag "source"
 *   tokenize  one malloc'd token per word; each new word is      tag "tokens"
 *             interned in a hash table as the lexer meets it     tag "index"
 *   index     a list of (document, line) postings per word,      tag "index"
 *             grown with realloc
 *
 * The profiler samples tagged allocations with a probability in proportion
 * to their size (one sample per 64 KiB allocated on average, or the
 * interval given), keeps each sample's call stack and scales it up to an
 * estimate of the bytes asked for. After the index phase, with everything
 * still live, the program writes the profile as folded stacks
 * ("tag:<tag>;_start;...;main;...;<function> <bytes>") and prints per tag
 * what it holds (allocated: in jemalloc's size classes), what the program
 * asked for (counted here) and the profile's estimate of that; then it
 * frees everything.
 *
 * A realloc is sampled like a malloc of its new size (and a sampled block
 * that is reallocated leaves the profile), so the postings lists, grown by
 * realloc, are estimated like the rest.
 *
 *   examples/profile [OUT.folded [INTERVAL_BYTES]]   default profile.folded
 *   flamegraph.pl profile.folded > profile.svg
 *
 * The functions are global and never inlined so that each is a frame of
 * its own, named in the profile: dladdr names only what the program
 * exports, so it is linked with -rdynamic (libtool: -export-dynamic).
 * Exit status: 0 done, 1 runtime failure, 2 bad usage. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <regionalloc.h>

#define NOINLINE __attribute__((noinline))

#define NDOCS 400
#define DOC_BYTES (16 << 10)
#define LINE_WORDS 12

static void die(const char *what)
{
    fprintf(stderr, "profile: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Bytes asked for and still live, per tag (ids 1 to 3): what the profile
 * estimates, counted exactly to compare. */
static size_t asked[4];

static void count_asked(ra_tag_t tag, size_t add, size_t sub)
{
    if (tag < sizeof asked / sizeof asked[0])
        asked[tag] += add - sub;
}

/* All of the work allocates through these: tagged in a --disable-override
 * build too. Running out of memory ends the program. */
static void *xmalloc(size_t size)
{
    void *p = ra_malloc(size);

    if (p == NULL)
        die("out of memory");
    count_asked(ra_tag_current(), size, 0);
    return p;
}

/* old_size: what ptr was asked for (0 for NULL). */
static void *xrealloc(void *ptr, size_t old_size, size_t size)
{
    ra_tag_t tag = ptr != NULL ? ra_tag_of(ptr) : ra_tag_current();
    void *p = ra_realloc(ptr, size);

    if (p == NULL)
        die("out of memory");
    count_asked(tag, size, old_size);
    return p;
}

/* -- the data ---------------------------------------------------------------- */

struct posting {
    uint32_t doc, line;
};

/* An interned word and where it occurs. */
struct entry {
    struct entry *next;
    struct posting *postings;
    uint32_t count, cap;
    char name[];
};

struct token {
    struct token *next;
    struct entry *word;
    uint32_t doc, line;
    uint16_t len;
    char text[];
};

struct index {
    struct entry **buckets;
    size_t nbuckets, nwords;
};

static char *docs[NDOCS];
static struct token *tokens[NDOCS];
static ra_tag_t tag_source, tag_tokens, tag_index;

/* -- read: generated text ---------------------------------------------------------- */

static uint32_t rng = 2463534242u;

static uint32_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

/* A word of 2 to 5 syllables; a few thousand different ones, the common
 * ones much more common (as in text). */
static size_t make_word(char *out)
{
    static const char *const syllables[] = {
        "ka", "lo", "mi", "ne", "su", "ra", "to", "vi", "de", "po",
        "an", "el", "is", "or", "un", "ba", "ce", "fu", "gi", "ho",
    };
    uint32_t r = next_random();
    unsigned n = 2 + (r & 3) % 3 + ((r >> 2) % 16 == 0);
    size_t len = 0;

    r >>= 6;
    for (unsigned i = 0; i < n; i++) {
        /* The square makes low numbers (common syllables) likelier. */
        unsigned s = (unsigned)((uint64_t)(r % 20) * (r % 20) / 20);
        memcpy(out + len, syllables[s], 2);
        len += 2;
        r = next_random();
    }
    return len;
}

/* One document of DOC_BYTES: lines of words. */
NOINLINE char *read_document(void)
{
    char *doc = xmalloc(DOC_BYTES + 1);
    size_t len = 0;
    unsigned words = 0;

    while (len + 12 < DOC_BYTES) {
        len += make_word(doc + len);
        doc[len++] = ++words % LINE_WORDS == 0 ? '\n' : ' ';
    }
    doc[len] = '\0';
    return doc;
}

NOINLINE void phase_read(void)
{
    RA_TAG_SCOPE(tag_source);
    for (unsigned i = 0; i < NDOCS; i++)
        docs[i] = read_document();
}

/* -- tokenize ----------------------------------------------------------------------- */

static uint64_t hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;

    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

NOINLINE void grow_table(struct index *ix)
{
    size_t n = ix->nbuckets == 0 ? 1024 : ix->nbuckets * 2;
    struct entry **b = xmalloc(n * sizeof *b);

    memset(b, 0, n * sizeof *b);
    for (size_t i = 0; i < ix->nbuckets; i++)
        for (struct entry *e = ix->buckets[i], *next; e != NULL; e = next) {
            size_t j = hash(e->name, strlen(e->name)) & (n - 1);
            next = e->next;
            e->next = b[j];
            b[j] = e;
        }
    ra_free(ix->buckets);
    ix->buckets = b;
    ix->nbuckets = n;
}

/* The word's entry, made under "index" when it is new. */
NOINLINE struct entry *intern(struct index *ix, const char *s, size_t len)
{
    RA_TAG_SCOPE(tag_index);
    struct entry *e;
    size_t j;

    if (ix->nwords * 2 >= ix->nbuckets)
        grow_table(ix);
    j = hash(s, len) & (ix->nbuckets - 1);
    for (e = ix->buckets[j]; e != NULL; e = e->next)
        if (strncmp(e->name, s, len) == 0 && e->name[len] == '\0')
            return e;
    e = xmalloc(sizeof *e + len + 1);
    memcpy(e->name, s, len);
    e->name[len] = '\0';
    e->postings = NULL;
    e->count = e->cap = 0;
    e->next = ix->buckets[j];
    ix->buckets[j] = e;
    ix->nwords++;
    return e;
}

NOINLINE struct token *make_token(const char *s, size_t len, uint32_t doc,
                                  uint32_t line)
{
    struct token *t = xmalloc(sizeof *t + len + 1);

    memcpy(t->text, s, len);
    t->text[len] = '\0';
    t->len = (uint16_t)len;
    t->doc = doc;
    t->line = line;
    return t;
}

NOINLINE void tokenize_document(struct index *ix, uint32_t doc)
{
    struct token **tail = &tokens[doc];
    const char *p = docs[doc];
    uint32_t line = 1;

    while (*p != '\0') {
        const char *start = p;
        struct token *t;
        while (*p != ' ' && *p != '\n' && *p != '\0')
            p++;
        t = make_token(start, (size_t)(p - start), doc, line);
        t->word = intern(ix, start, (size_t)(p - start));
        t->next = NULL;
        *tail = t;
        tail = &t->next;
        if (*p == '\n')
            line++;
        if (*p != '\0')
            p++;
    }
}

NOINLINE void phase_tokenize(struct index *ix)
{
    RA_TAG_SCOPE(tag_tokens);
    for (uint32_t i = 0; i < NDOCS; i++)
        tokenize_document(ix, i);
}

/* -- index -------------------------------------------------------------------------- */

NOINLINE void add_posting(struct entry *e, uint32_t doc, uint32_t line)
{
    if (e->count == e->cap) {
        uint32_t cap = e->cap == 0 ? 4 : e->cap * 2;
        e->postings = xrealloc(e->postings, e->cap * sizeof *e->postings,
                               cap * sizeof *e->postings);
        e->cap = cap;
    }
    e->postings[e->count++] = (struct posting){doc, line};
}

NOINLINE void phase_index(void)
{
    RA_TAG_SCOPE(tag_index);
    for (uint32_t i = 0; i < NDOCS; i++)
        for (struct token *t = tokens[i]; t != NULL; t = t->next)
            add_posting(t->word, t->doc, t->line);
}

/* -- the profile -------------------------------------------------------------------- */

/* Writes the folded profile of every tag to path, and returns it in a
 * string too (free() it). */
static char *write_profile(const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    FILE *out;

    if (mem == NULL)
        die("open_memstream");
    if (ra_prof_dump(mem, RA_PROF_FOLDED, RA_TAG_ALL) != 0)
        die("ra_prof_dump");
    if (fclose(mem) != 0)
        die("open_memstream");
    out = fopen(path, "w");
    if (out == NULL)
        die(path);
    if (fwrite(buf, 1, len, out) != len || fclose(out) != 0)
        die(path);
    return buf;
}

/* Sums the folded lines of tag name ("tag:<name>;... <bytes>"). */
static uint64_t estimated_bytes(const char *folded, const char *name,
                                unsigned *lines)
{
    size_t n = strlen(name);
    uint64_t sum = 0;

    *lines = 0;
    for (const char *l = folded; *l != '\0';) {
        const char *end = strchr(l, '\n');
        const char *space = end != NULL ? memrchr(l, ' ', (size_t)(end - l))
                                        : NULL;
        if (space == NULL)
            break;
        if (strncmp(l, "tag:", 4) == 0 && strncmp(l + 4, name, n) == 0 &&
            l[4 + n] == ';') {
            sum += strtoull(space + 1, NULL, 10);
            ++*lines;
        }
        l = end + 1;
    }
    return sum;
}

static void print_tag(const char *folded, ra_tag_t tag)
{
    ra_tag_stats_t st;
    unsigned lines;
    uint64_t est = estimated_bytes(folded, ra_tag_name(tag), &lines);

    if (ra_tag_stats(tag, &st) != 0)
        die("ra_tag_stats");
    printf("%-8s %9.1f MiB %9.1f MiB %9.1f MiB %7u\n", ra_tag_name(tag),
           (double)st.allocated / (1 << 20), (double)asked[tag] / (1 << 20),
           (double)est / (1 << 20), lines);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "profile.folded";
    size_t interval = 64 << 10;
    struct index ix = {NULL, 0, 0};
    char *folded;

    if (argc > 3 || (argc > 1 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: %s [OUT.folded [INTERVAL_BYTES]]\n", argv[0]);
        return 2;
    }
    if (argc == 3) {
        char *end;
        interval = strtoul(argv[2], &end, 10);
        if (*end != '\0' || interval == 0) {
            fprintf(stderr, "profile: bad interval %s\n", argv[2]);
            return 2;
        }
    }
    if (!ra_enabled()) {
        fprintf(stderr, "profile: libregionalloc is in pass-through mode "
                        "(REGIONALLOC=0?): nothing to profile\n");
        return 1;
    }
    tag_source = ra_tag_create("source");
    tag_tokens = ra_tag_create("tokens");
    tag_index = ra_tag_create("index");
    if (tag_source == RA_TAG_NONE || tag_tokens == RA_TAG_NONE ||
        tag_index == RA_TAG_NONE)
        die("ra_tag_create");
    if (ra_prof_start(interval) != 0)
        die("ra_prof_start");

    phase_read();
    phase_tokenize(&ix);
    phase_index();

    /* Everything is live: the profile shows where each tag's bytes come
     * from. (The estimates are of the bytes asked for; allocated counts
     * jemalloc's size classes, slightly more.) */
    folded = write_profile(path);
    printf("profile of %u documents, %zu distinct words, sampled every %zu "
           "bytes on average\n\n",
           NDOCS, ix.nwords, interval);
    printf("%-8s %13s %13s %13s %7s\n", "tag", "allocated", "asked for",
           "estimate", "stacks");
    print_tag(folded, tag_source);
    print_tag(folded, tag_tokens);
    print_tag(folded, tag_index);
    printf("\nwrote %s; make a flamegraph with\n"
           "  flamegraph.pl %s > profile.svg\n"
           "or open it in https://www.speedscope.app\n",
           path, path);
    free(folded);

    ra_prof_stop();
    for (unsigned i = 0; i < NDOCS; i++) {
        for (struct token *t = tokens[i], *next; t != NULL; t = next) {
            next = t->next;
            ra_free(t);
        }
        ra_free(docs[i]);
    }
    for (size_t i = 0; i < ix.nbuckets; i++)
        for (struct entry *e = ix.buckets[i], *next; e != NULL; e = next) {
            next = e->next;
            ra_free(e->postings);
            ra_free(e);
        }
    ra_free(ix.buckets);
    return 0;
}
