/* The README's demo: index the identifiers of a source tree in layered
 * phases, one tag per phase, with a checkpoint after each phase.
 *
 *   read      every regular file's bytes, kept in memory     tag "source"
 *   tokenize  one malloc'd token per identifier, number,      tag "tokens"
 *             string and punctuation character; identifiers
 *             are interned in a hash table as they are met    tag "index"
 *   index     (file, line) postings per identifier, lists     tag "index"
 *             that grow with realloc
 *   drop      free the source bytes and the tokens: ra_tag_reset of
 *             both tags, or (--drop=free) one block at a time
 *   purge     give the dropped tags' pages back to the OS (a reset has
 *             done it already)
 *
 * --untagged does the same work with nothing pushed, so every block lands in
 * jemalloc's ordinary arenas, and purges them all; compare the rss after the
 * purge. The interning is why tags win there: the table's entries are made
 * during tokenizing, next to the tokens and in the same size classes, so
 * untagged they end up on the tokens' pages and keep those pages alive after
 * the tokens are freed. Tagged, each tag's blocks sit in its own region.
 *
 * The program allocates through ra_malloc/ra_realloc/ra_free so that it is
 * tagged in a --disable-override build too. With the override (the default)
 * plain malloc would be tagged the same way, as nftw's own allocations are.
 * Exit status: 0 done, 1 runtime failure, 2 bad usage or directory. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <regionalloc.h>

#define DEFAULT_ROOT "/usr/include"
#define DEFAULT_MAX_BYTES ((size_t)256 << 20)
#define TOP_N 5

static const char *progname = "indexer";

/* -- errors and allocation ------------------------------------------------- */

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", progname, what, strerror(errno));
    exit(1);
}

/* Every allocation of the work proper goes through these three. Running out
 * of memory ends the program: an example has nothing better to do. */
static void *xmalloc(size_t size)
{
    void *p = ra_malloc(size);

    if (p == NULL)
        die("out of memory");
    return p;
}

static void *xrealloc_array(void *ptr, size_t n, size_t size)
{
    void *p;

    if (size != 0 && n > SIZE_MAX / size) {
        errno = ENOMEM;
        die("out of memory");
    }
    p = ra_realloc(ptr, n * size);
    if (p == NULL)
        die("out of memory");
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = ra_calloc(n, size);

    if (p == NULL)
        die("out of memory");
    return p;
}

static char *xstrdup(const char *s)
{
    size_t len = strlen(s) + 1;

    return memcpy(xmalloc(len), s, len);
}

/* -- tags and checkpoints -------------------------------------------------- */

/* RA_TAG_NONE for every phase in --untagged mode: nothing is pushed. */
static ra_tag_t tag_source, tag_tokens, tag_index;
static bool checkpoints_on;

static void enter(ra_tag_t tag)
{
    if (tag != RA_TAG_NONE && ra_tag_push(tag) != 0)
        die("ra_tag_push");
}

static void leave(ra_tag_t tag)
{
    if (tag != RA_TAG_NONE && ra_tag_pop(tag) != 0)
        die("ra_tag_pop");
}

static void checkpoint(const char *label)
{
    if (!checkpoints_on)
        return;
    if (ra_checkpoint(label) != 0)
        die("ra_checkpoint");
}

/* Resident bytes of the whole process, from /proc/self/statm; 0 if unknown. */
static size_t process_rss(void)
{
    unsigned long size, resident = 0;
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    char buf[128];
    ssize_t n;

    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (sscanf(buf, "%lu %lu", &size, &resident) != 2)
        return 0;
    return resident * (size_t)sysconf(_SC_PAGESIZE);
}

static const char *human_bytes(char *buf, size_t len, size_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    unsigned u = 0;

    if (bytes < 1024) {
        snprintf(buf, len, "%zu B", bytes);
        return buf;
    }
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

/* -- phase 1: walk the tree and read every regular file -------------------- */

struct source_file {
    char *path;
    char *data; /* NULL for an empty file */
    size_t len;
};

struct sources {
    struct source_file *files;
    size_t nfiles, cap;
    size_t files_read; /* nfiles, kept after the sources are freed */
    size_t bytes;      /* sum of len */
    size_t max_bytes;  /* --max-bytes: files that would pass it are skipped */
    size_t unreadable, symlinks, special, binary, over_budget;
};

/* nftw passes no user pointer. */
static struct sources walk;

/* Reads the whole regular file at path into memory under the current tag.
 * Returns false (and counts why) when the file is skipped. */
static bool read_file(const char *path, struct source_file *out)
{
    /* O_NONBLOCK: a FIFO swapped in after nftw's lstat must not hang us;
     * O_NOFOLLOW: nor a symlink swapped in. */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    size_t len, got = 0;
    char *data = NULL;

    if (fd < 0) {
        walk.unreadable++;
        return false;
    }
    if (fstat(fd, &st) != 0) {
        walk.unreadable++;
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        walk.special++;
        goto fail;
    }
    len = (size_t)st.st_size;
    /* Lines and token lengths are 32-bit; the budget bounds memory. */
    if (st.st_size < 0 || (uint64_t)st.st_size >= UINT32_MAX ||
        len > walk.max_bytes - walk.bytes) {
        walk.over_budget++;
        goto fail;
    }
    if (len > 0) {
        data = xmalloc(len);
        /* Read at most the size fstat saw: a growing file cannot push the
         * total past the budget. A file that shrank keeps what was there. */
        while (got < len) {
            ssize_t n = read(fd, data + got, len - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                walk.unreadable++;
                ra_free(data);
                goto fail;
            }
            if (n == 0)
                break;
            got += (size_t)n;
        }
    }
    close(fd);
    /* A NUL byte says binary (as grep decides): an object file would make
     * a token of nearly every byte. */
    if (got > 0 && memchr(data, '\0', got) != NULL) {
        walk.binary++;
        ra_free(data);
        return false;
    }
    out->path = xstrdup(path);
    out->data = data;
    out->len = got;
    return true;
fail:
    close(fd);
    return false;
}

static int visit(const char *path, const struct stat *sb, int type,
                 struct FTW *ftw)
{
    (void)ftw;
    switch (type) {
    case FTW_F:
        break;
    case FTW_SL:
    case FTW_SLN:
        /* Symlinks are not followed (FTW_PHYS): no loops, no file twice. */
        walk.symlinks++;
        return 0;
    case FTW_DNR:
    case FTW_NS:
        walk.unreadable++;
        return 0;
    default: /* FTW_D, FTW_DP */
        return 0;
    }
    if (!S_ISREG(sb->st_mode)) {
        walk.special++;
        return 0;
    }
    if (walk.nfiles == walk.cap) {
        walk.cap = walk.cap ? walk.cap * 2 : 256;
        walk.files = xrealloc_array(walk.files, walk.cap, sizeof *walk.files);
    }
    if (read_file(path, &walk.files[walk.nfiles])) {
        walk.bytes += walk.files[walk.nfiles].len;
        walk.nfiles++;
        walk.files_read++;
    }
    return 0;
}

/* Frees the sources one block at a time, unless reset: ra_tag_reset of
 * "source" has freed them all (the file table too); only forget them. */
static void free_sources(bool reset)
{
    if (!reset) {
        for (size_t i = 0; i < walk.nfiles; i++) {
            ra_free(walk.files[i].path);
            ra_free(walk.files[i].data);
        }
        ra_free(walk.files);
    }
    walk.files = NULL;
    walk.nfiles = walk.cap = 0;
}

/* -- the identifier table (tag "index") ------------------------------------ */

struct posting {
    uint32_t file; /* index into index.paths */
    uint32_t line;
};

/* An interned identifier and its postings. */
struct ident {
    struct posting *postings; /* grows with realloc, doubling */
    uint32_t count, cap;
    uint32_t hash;
    uint32_t len;
    char name[];
};

/* Open addressing, linear probing; nslots is a power of two. The index owns
 * copies of the file paths so that it outlives the sources. */
struct index {
    struct ident **slots;
    size_t nslots, count;
    char **paths;
    size_t npaths;
};

static uint32_t hash_bytes(const char *s, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static void index_grow(struct index *ix)
{
    size_t nslots = ix->nslots ? ix->nslots * 2 : 1024;
    struct ident **slots = xcalloc(nslots, sizeof(struct ident *));

    for (size_t i = 0; i < ix->nslots; i++) {
        struct ident *e = ix->slots[i];
        size_t j;

        if (e == NULL)
            continue;
        for (j = e->hash & (nslots - 1); slots[j] != NULL;
             j = (j + 1) & (nslots - 1))
            ;
        slots[j] = e;
    }
    ra_free(ix->slots);
    ix->slots = slots;
    ix->nslots = nslots;
}

/* Returns the entry for name, creating it under the "index" tag. The lexer
 * calls this, as a compiler's does, so the table grows while the tokens are
 * made: two lifetimes, allocated side by side. */
static struct ident *intern(struct index *ix, const char *name, uint32_t len)
{
    uint32_t h = hash_bytes(name, len);
    struct ident *e;
    size_t i;

    i = h & (ix->nslots - 1); /* the table is empty until the first grow */
    for (; ix->nslots > 0 && (e = ix->slots[i]) != NULL;
         i = (i + 1) & (ix->nslots - 1))
        if (e->hash == h && e->len == len && memcmp(e->name, name, len) == 0)
            return e;

    enter(tag_index);
    /* Keep the load factor under 3/4 (and make the first table). */
    if ((ix->count + 1) * 4 > ix->nslots * 3) {
        index_grow(ix);
        for (i = h & (ix->nslots - 1); ix->slots[i] != NULL;
             i = (i + 1) & (ix->nslots - 1))
            ;
    }
    e = xmalloc(offsetof(struct ident, name) + len + 1);
    leave(tag_index);
    e->postings = NULL;
    e->count = e->cap = 0;
    e->hash = h;
    e->len = len;
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    ix->slots[i] = e;
    ix->count++;
    return e;
}

/* Appends (file, line) to e's postings; the caller has pushed "index" (a
 * first realloc(NULL, n) takes the current tag, later ones keep it). */
static void add_posting(struct ident *e, uint32_t file, uint32_t line)
{
    if (e->count == e->cap) {
        size_t cap = e->cap ? (size_t)e->cap * 2 : 2;

        if (e->count == UINT32_MAX) {
            errno = EOVERFLOW;
            die(e->name);
        }
        if (cap > UINT32_MAX)
            cap = UINT32_MAX;
        e->postings = xrealloc_array(e->postings, cap, sizeof *e->postings);
        e->cap = (uint32_t)cap;
    }
    e->postings[e->count++] = (struct posting){file, line};
}

static void index_free(struct index *ix)
{
    for (size_t i = 0; i < ix->nslots; i++)
        if (ix->slots[i] != NULL) {
            ra_free(ix->slots[i]->postings);
            ra_free(ix->slots[i]);
        }
    ra_free(ix->slots);
    for (size_t f = 0; f < ix->npaths; f++)
        ra_free(ix->paths[f]);
    ra_free(ix->paths);
}

/* -- phase 2: tokenize ----------------------------------------------------- */

enum token_kind {
    TOK_IDENT,     /* indexed */
    TOK_KEYWORD,   /* C and C++ keywords: not indexed */
    TOK_DIRECTIVE, /* "define" in "#define", "defined" in "#if": not indexed */
    TOK_NUMBER,
    TOK_STRING, /* "...", '...', <header.h> after #include */
    TOK_PUNCT   /* one token per character */
};

/* One malloc per token: the many small blocks a real front end makes. An
 * identifier points to its interned entry and keeps no text of its own. */
struct token {
    struct token *next;
    struct ident *ident; /* TOK_IDENT only, else NULL */
    uint32_t line;
    uint32_t len; /* of text */
    unsigned char kind;
    char text[];
};

struct token_stats {
    size_t tokens, identifiers;
};

/* Sorted with qsort at start-up, searched with bsearch. */
static const char *keywords[] = {
    /* C11 */
    "auto", "break", "case", "char", "const", "continue", "default", "do",
    "double", "else", "enum", "extern", "float", "for", "goto", "if",
    "inline", "int", "long", "register", "restrict", "return", "short",
    "signed", "sizeof", "static", "struct", "switch", "typedef", "union",
    "unsigned", "void", "volatile", "while", "_Alignas", "_Alignof",
    "_Atomic", "_Bool", "_Complex", "_Generic", "_Imaginary", "_Noreturn",
    "_Static_assert", "_Thread_local",
    /* C23 */
    "alignas", "alignof", "bool", "constexpr", "false", "nullptr",
    "static_assert", "thread_local", "true", "typeof", "typeof_unqual",
    /* C++ (the tree may hold libstdc++'s headers) */
    "catch", "char16_t", "char32_t", "char8_t", "class", "co_await",
    "co_return", "co_yield", "concept", "const_cast", "consteval",
    "constinit", "decltype", "delete", "dynamic_cast", "explicit", "export",
    "friend", "mutable", "namespace", "new", "noexcept", "operator",
    "private", "protected", "public", "reinterpret_cast", "requires",
    "static_cast", "template", "this", "throw", "try", "typeid", "typename",
    "using", "virtual", "wchar_t",
};
#define NKEYWORDS (sizeof keywords / sizeof keywords[0])

struct word {
    const char *s;
    size_t len;
};

static int compare_keywords(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int compare_word_keyword(const void *key, const void *elem)
{
    const struct word *w = key;
    const char *kw = *(const char *const *)elem;
    int c = strncmp(w->s, kw, w->len);

    if (c != 0)
        return c;
    return kw[w->len] == '\0' ? 0 : -1;
}

static bool is_keyword(const char *s, size_t len)
{
    struct word w = {s, len};

    return bsearch(&w, keywords, NKEYWORDS, sizeof keywords[0],
                   compare_word_keyword) != NULL;
}

static bool word_is(const char *s, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

/* ASCII classes, independent of the locale. */
static bool is_ident_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_ident_char(unsigned char c)
{
    return is_ident_start(c) || is_digit(c);
}

/* p at an opening quote: returns the end of the literal. An unterminated one
 * (an apostrophe in an #error message) ends at the end of its line. */
static const char *scan_quoted(const char *p, const char *end, uint32_t *line)
{
    char quote = *p++;

    while (p < end && *p != quote && *p != '\n') {
        if (*p == '\\' && p + 1 < end) {
            if (p[1] == '\n')
                (*line)++;
            p += 2;
            continue;
        }
        p++;
    }
    return p < end && *p == quote ? p + 1 : p;
}

static struct token *new_token(enum token_kind kind, const char *text,
                               size_t len, uint32_t line)
{
    struct token *t = xmalloc(offsetof(struct token, text) + len + 1);

    t->next = NULL;
    t->ident = NULL;
    t->line = line;
    t->len = (uint32_t)len; /* files are under 4 GiB (read_file) */
    t->kind = (unsigned char)kind;
    memcpy(t->text, text, len);
    t->text[len] = '\0';
    return t;
}

/* Splits one file into tokens, a list in file order. Comments and white
 * space make no token. Preprocessor lines are recognised just enough to
 * keep directive names and <header> names out of the index. */
static struct token *tokenize(const struct source_file *f, struct index *ix,
                              struct token_stats *st)
{
    enum { PP_NONE, PP_HASH, PP_LINE, PP_INCLUDE } pp = PP_NONE;
    const char *p, *end;
    struct token *head = NULL, **tail = &head;
    uint32_t line = 1;
    bool line_start = true;

    if (f->len == 0)
        return NULL; /* f->data is NULL: no arithmetic on it */
    p = f->data;
    end = p + f->len;

    while (p < end) {
        unsigned char c = (unsigned char)*p;
        const char *start = p;
        uint32_t start_line = line;
        enum token_kind kind;

        if (c == '\n') {
            line++;
            line_start = true;
            pp = PP_NONE;
            p++;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            p++;
            continue;
        }
        if (c == '\\' && p + 1 < end && p[1] == '\n') {
            p += 2; /* line splice: a directive goes on */
            line++;
            continue;
        }
        if (c == '/' && p + 1 < end && p[1] == '*') {
            for (p += 2; p < end; p++) {
                if (*p == '\n')
                    line++;
                else if (*p == '*' && p + 1 < end && p[1] == '/')
                    break;
            }
            p = p < end ? p + 2 : end;
            continue;
        }
        if (c == '/' && p + 1 < end && p[1] == '/') {
            while (p < end && *p != '\n')
                p++;
            continue;
        }

        if (is_ident_start(c)) {
            size_t len;

            while (p < end && is_ident_char((unsigned char)*p))
                p++;
            len = (size_t)(p - start);
            if (p < end && (*p == '"' || *p == '\'') &&
                (word_is(start, len, "L") || word_is(start, len, "u") ||
                 word_is(start, len, "U") || word_is(start, len, "u8"))) {
                p = scan_quoted(p, end, &line); /* L"wide" and friends */
                kind = TOK_STRING;
            } else if (pp == PP_HASH) {
                kind = TOK_DIRECTIVE;
                pp = word_is(start, len, "include") ||
                             word_is(start, len, "include_next") ||
                             word_is(start, len, "import")
                         ? PP_INCLUDE
                         : PP_LINE;
            } else if (pp == PP_LINE && word_is(start, len, "defined")) {
                kind = TOK_DIRECTIVE;
            } else if (is_keyword(start, len)) {
                kind = TOK_KEYWORD;
            } else {
                kind = TOK_IDENT;
                st->identifiers++;
            }
        } else if (is_digit(c) || (c == '.' && p + 1 < end &&
                                   is_digit((unsigned char)p[1]))) {
            /* A preprocessing number: 0x1fULL, 1.5e-3, 1'000 (C23). */
            for (p++; p < end; p++) {
                unsigned char d = (unsigned char)*p;
                if ((d == '+' || d == '-') && strchr("eEpP", p[-1]) != NULL)
                    continue;
                if (d == '\'' && p + 1 < end &&
                    is_ident_char((unsigned char)p[1]))
                    continue;
                if (!is_ident_char(d) && d != '.')
                    break;
            }
            kind = TOK_NUMBER;
        } else if (c == '"' || c == '\'') {
            p = scan_quoted(p, end, &line);
            kind = TOK_STRING;
        } else if (c == '<' && pp == PP_INCLUDE) {
            while (p < end && *p != '>' && *p != '\n')
                p++;
            if (p < end && *p == '>')
                p++;
            kind = TOK_STRING;
        } else {
            p++;
            kind = TOK_PUNCT;
        }

        /* Only the first token after a line-initial '#' names a directive. */
        if (pp == PP_HASH)
            pp = PP_LINE;
        if (kind == TOK_PUNCT && c == '#' && line_start)
            pp = PP_HASH;
        line_start = false;

        if (kind == TOK_IDENT) {
            struct ident *id = intern(ix, start, (uint32_t)(p - start));

            *tail = new_token(kind, "", 0, start_line);
            (*tail)->ident = id;
        } else {
            *tail = new_token(kind, start, (size_t)(p - start), start_line);
        }
        tail = &(*tail)->next;
        st->tokens++;
    }
    return head;
}

static void free_tokens(struct token **lists, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (struct token *t = lists[i], *next; t != NULL; t = next) {
            next = t->next;
            ra_free(t);
        }
    ra_free(lists);
}

/* -- phase 3: postings ----------------------------------------------------- */

/* Copies the file paths into the index and records where every identifier
 * occurs. The caller has pushed "index". */
static void index_build(struct index *ix, struct token *const *lists)
{
    ix->paths = xcalloc(walk.nfiles ? walk.nfiles : 1, sizeof *ix->paths);
    ix->npaths = walk.nfiles;
    for (size_t f = 0; f < walk.nfiles; f++) {
        ix->paths[f] = xstrdup(walk.files[f].path);
        for (const struct token *t = lists[f]; t != NULL; t = t->next)
            if (t->kind == TOK_IDENT)
                add_posting(t->ident, (uint32_t)f, t->line);
    }
}

/* More occurrences first; equal counts in name order, so runs agree. */
static bool ranks_before(const struct ident *a, const struct ident *b)
{
    if (a->count != b->count)
        return a->count > b->count;
    return strcmp(a->name, b->name) < 0;
}

/* Fills top[] with the n most frequent identifiers; returns how many. */
static size_t index_top(const struct index *ix, const struct ident **top,
                        size_t n)
{
    size_t have = 0;

    for (size_t i = 0; i < ix->nslots; i++) {
        const struct ident *e = ix->slots[i];
        size_t j;

        if (e == NULL)
            continue;
        if (have == n && !ranks_before(e, top[n - 1]))
            continue;
        j = have < n ? have++ : n - 1;
        for (; j > 0 && ranks_before(e, top[j - 1]); j--)
            top[j] = top[j - 1];
        top[j] = e;
    }
    return have;
}

/* -- command line ---------------------------------------------------------- */

struct options {
    const char *root;
    bool json, untagged;
    bool drop_by_reset; /* --drop=reset (the default when tagged) */
    size_t max_bytes;
};

static void usage(FILE *out)
{
    fprintf(out,
"Usage: %s [--json] [--untagged] [--drop=reset|free] [--max-bytes N]\n"
"       [DIRECTORY]\n"
"Indexes the identifiers of every file under DIRECTORY (default %s) in\n"
"phases, each under its own libregionalloc tag, and prints a checkpoint\n"
"table (per-tag allocated bytes, jemalloc's totals, process RSS) after\n"
"read, tokenize, index, drop (source and tokens freed) and purge.\n"
"\n"
"  --json         print the checkpoints as one JSON document on stdout\n"
"                 (the summary goes to stderr)\n"
"  --untagged     the same work with no tag pushed; the purge step then\n"
"                 purges every arena (ra_purge_all). Compare the rss\n"
"                 after the purge with the tagged run's.\n"
"  --drop=reset   drop the sources and tokens with ra_tag_reset: every\n"
"                 block of both tags at once (the default, tagged only)\n"
"  --drop=free    drop them one block at a time with free, as a program\n"
"                 without tags must (the default with --untagged);\n"
"                 compare the drop times in the summary\n"
"  --max-bytes N  read at most N bytes of files (suffix K, M or G; default\n"
"                 256M); files that would pass it are skipped. Peak memory\n"
"                 is about 6 times the bytes read for C sources, 35 times\n"
"                 at worst (text that is all punctuation).\n"
"  -h, --help     this text\n"
"\n"
"Symbolic links are not followed; unreadable, special and binary files\n"
"(with a NUL byte) are skipped and counted.\n"
"Exit status: 0 done, 1 failure, 2 bad usage or directory.\n",
            progname, DEFAULT_ROOT);
}

static _Noreturn __attribute__((format(printf, 1, 2))) void
bad_usage(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", progname);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", progname);
    exit(2);
}

/* "4096", "64K", "256M", "1G" (powers of 1024). False if malformed, zero or
 * too large. */
static bool parse_size(const char *s, size_t *out)
{
    unsigned long long v;
    unsigned shift = 0;
    char *end;

    if (!is_digit((unsigned char)*s))
        return false;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return false;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end != '\0' || v == 0 || v > (SIZE_MAX >> shift))
        return false;
    *out = (size_t)v << shift;
    return true;
}

static void parse_options(int argc, char **argv, struct options *opt)
{
    enum { OPT_JSON = 256, OPT_UNTAGGED, OPT_DROP, OPT_MAX_BYTES };
    static const struct option longopts[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"untagged", no_argument, NULL, OPT_UNTAGGED},
        {"drop", required_argument, NULL, OPT_DROP},
        {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *drop = NULL;
    int c;

    opt->root = DEFAULT_ROOT;
    opt->json = opt->untagged = false;
    opt->max_bytes = DEFAULT_MAX_BYTES;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_JSON:
            opt->json = true;
            break;
        case OPT_UNTAGGED:
            opt->untagged = true;
            break;
        case OPT_DROP:
            if (strcmp(optarg, "reset") != 0 && strcmp(optarg, "free") != 0)
                bad_usage("--drop: '%s' is neither 'reset' nor 'free'",
                          optarg);
            drop = optarg;
            break;
        case OPT_MAX_BYTES:
            if (!parse_size(optarg, &opt->max_bytes))
                bad_usage("--max-bytes: '%s' is not a size such as 4096, "
                          "64K, 256M or 1G", optarg);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default: /* getopt_long has said what was wrong */
            fprintf(stderr, "Try '%s --help'.\n", progname);
            exit(2);
        }
    }
    if (argc - optind > 1)
        bad_usage("one directory at most (got '%s' too)", argv[optind + 1]);
    if (optind < argc)
        opt->root = argv[optind];
    if (opt->untagged && drop != NULL && strcmp(drop, "reset") == 0)
        bad_usage("--drop=reset needs tags: not with --untagged");
    opt->drop_by_reset = !opt->untagged && (drop == NULL ||
                                            strcmp(drop, "reset") == 0);
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* -- main ------------------------------------------------------------------ */

/* How long the drop and the purge took. */
struct drop_times {
    uint64_t drop_ns, purge_ns;
};

static void print_summary(FILE *out, const struct options *opt,
                          const struct token_stats *ts,
                          const struct index *ix, size_t rss_after_purge,
                          const struct drop_times *dt)
{
    const struct ident *top[TOP_N];
    size_t ntop = index_top(ix, top, TOP_N);
    size_t skipped = walk.unreadable + walk.symlinks + walk.special +
                     walk.binary + walk.over_budget;
    char a[32], b[32];

    fprintf(out, "indexed %s: %zu files, %zu bytes (%s), %zu skipped",
            opt->root, walk.files_read, walk.bytes,
            human_bytes(a, sizeof a, walk.bytes), skipped);
    if (skipped > 0)
        fprintf(out, " (%zu unreadable, %zu symlinks not followed, "
                     "%zu special, %zu binary, %zu over --max-bytes)",
                walk.unreadable, walk.symlinks, walk.special, walk.binary,
                walk.over_budget);
    fprintf(out, "\n%zu tokens, %zu identifiers, %zu distinct\n", ts->tokens,
            ts->identifiers, ix->count);
    fprintf(out, "top identifiers:");
    for (size_t i = 0; i < ntop; i++)
        fprintf(out, "%s %s %lu", i ? "," : "", top[i]->name,
                (unsigned long)top[i]->count);
    fprintf(out, "%s\n", ntop ? "" : " none");
    fprintf(out, "drop and purge: %.1f ms (%s: %.1f ms, then %s: %.1f ms)\n",
            ms(dt->drop_ns + dt->purge_ns),
            opt->drop_by_reset ? "ra_tag_reset of source and tokens"
                               : "free one block at a time",
            ms(dt->drop_ns),
            !checkpoints_on ? "no purge (pass-through mode)"
            : opt->untagged ? "ra_purge_all"
                            : "ra_tag_purge of source and tokens",
            ms(dt->purge_ns));
    if (rss_after_purge > 0)
        fprintf(out, "rss after drop and purge: %s (%zu bytes; %s)\n",
                human_bytes(b, sizeof b, rss_after_purge), rss_after_purge,
                !checkpoints_on ? "pass-through mode, nothing purged"
                : opt->untagged ? "untagged, ra_purge_all"
                                : "tagged, ra_tag_purge of source and tokens");
}

int main(int argc, char **argv)
{
    struct options opt;
    struct token_stats ts = {0, 0};
    struct index ix = {NULL, 0, 0, NULL, 0};
    struct token **lists;
    struct drop_times dt;
    struct stat st;
    char *root_real;
    size_t rss_after_purge;
    int status = 0;

    if (argc > 0 && argv[0] != NULL && argv[0][0] != '\0') {
        const char *slash = strrchr(argv[0], '/');
        progname = slash != NULL ? slash + 1 : argv[0];
    }
    parse_options(argc, argv, &opt);

    if (stat(opt.root, &st) != 0) {
        fprintf(stderr, "%s: %s: %s\n", progname, opt.root, strerror(errno));
        return 2;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s: %s\n", progname, opt.root,
                strerror(ENOTDIR));
        return 2;
    }
    /* nftw with FTW_PHYS would not enter a root that is a symlink. */
    root_real = realpath(opt.root, NULL);
    if (root_real == NULL) {
        fprintf(stderr, "%s: %s: %s\n", progname, opt.root, strerror(errno));
        return 2;
    }

    if (!ra_enabled()) {
        if (opt.json) {
            fprintf(stderr, "%s: regionalloc is in pass-through mode "
                            "(REGIONALLOC=0?): no checkpoints to print\n",
                    progname);
            free(root_real);
            return 1;
        }
        fprintf(stderr, "%s: regionalloc is in pass-through mode "
                        "(REGIONALLOC=0?): no tags, no checkpoints\n",
                progname);
        opt.untagged = true;
    } else {
        checkpoints_on = true;
    }
    if (!opt.untagged) {
        tag_source = ra_tag_create("source");
        tag_tokens = ra_tag_create("tokens");
        tag_index = ra_tag_create("index");
        if (tag_source == RA_TAG_NONE || tag_tokens == RA_TAG_NONE ||
            tag_index == RA_TAG_NONE)
            die("ra_tag_create");
    }
    qsort(keywords, NKEYWORDS, sizeof keywords[0], compare_keywords);

    /* read */
    walk.max_bytes = opt.max_bytes;
    enter(tag_source);
    if (nftw(root_real, visit, 32, FTW_PHYS) != 0)
        die(opt.root);
    leave(tag_source);
    free(root_real);
    checkpoint("after read");

    /* tokenize */
    enter(tag_tokens);
    lists = xcalloc(walk.nfiles ? walk.nfiles : 1, sizeof(struct token *));
    for (size_t f = 0; f < walk.nfiles; f++)
        lists[f] = tokenize(&walk.files[f], &ix, &ts);
    leave(tag_tokens);
    checkpoint("after tokenize");

    /* index */
    enter(tag_index);
    index_build(&ix, lists);
    leave(tag_index);
    checkpoint("after index");

    /* drop. A reset frees every block of the two tags at once, the lists and
     * the file table included, and gives their pages back; free() one at a
     * time needs no tag either, each block goes back to its owner. */
    dt.drop_ns = now_ns();
    if (opt.drop_by_reset) {
        if (ra_tag_reset(tag_tokens) != 0 || ra_tag_reset(tag_source) != 0)
            die("ra_tag_reset");
    } else {
        free_tokens(lists, walk.nfiles);
    }
    free_sources(opt.drop_by_reset);
    dt.drop_ns = now_ns() - dt.drop_ns;
    checkpoint("after drop");

    /* purge. Tagged, the dropped tags' regions hold nothing but free pages
     * now, so purging them returns all of it. Untagged, the identifier
     * table's entries were interned between the tokens, on the same pages,
     * so those pages stay partly used after the tokens are freed; purging
     * every arena (the fairest comparison: with nothing tagged there is no
     * narrower purge) still cannot return a page holding one live block. */
    dt.purge_ns = now_ns();
    if (checkpoints_on) {
        if (opt.untagged ? ra_purge_all() != 0
                         : ra_tag_purge(tag_source) != 0 ||
                               ra_tag_purge(tag_tokens) != 0)
            die(opt.untagged ? "ra_purge_all" : "ra_tag_purge");
    }
    dt.purge_ns = now_ns() - dt.purge_ns;
    checkpoint("after purge");
    rss_after_purge = process_rss();

    if (opt.json) {
        if (ra_checkpoint_report(stdout, RA_FORMAT_JSON) != 0)
            die("ra_checkpoint_report");
        print_summary(stderr, &opt, &ts, &ix, rss_after_purge, &dt);
    } else {
        if (checkpoints_on) {
            printf("checkpoints (%s)\n",
                   opt.untagged ? "untagged: nothing pushed"
                                : "tagged: source, tokens, index");
            fflush(stdout);
            if (ra_checkpoint_report(stdout, RA_FORMAT_TEXT) != 0)
                die("ra_checkpoint_report");
            printf("\nper-tag usage now\n");
            fflush(stdout);
            if (ra_report(stdout, RA_FORMAT_TEXT) != 0)
                die("ra_report");
            putchar('\n');
        }
        print_summary(stdout, &opt, &ts, &ix, rss_after_purge, &dt);
    }

    index_free(&ix);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: writing stdout: %s\n", progname,
                strerror(errno));
        status = 1;
    }
    return status;
}
