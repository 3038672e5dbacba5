/* Whether an ELF file is Python, read as the dynamic loader reads it: an
 * interpreter exports Py_BytesMain or Py_Main (Debian's python3.11 has
 * libpython built in), a program that embeds Python names libpython3 in
 * its DT_NEEDED. The file is untrusted: every read is a pread of a bounded
 * size into this file's buffers, every offset is checked before it is
 * used, every loop has a bound, and what does not add up is not Python
 * (exec says what is wrong with it, as it would have). */
#include <elf.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "elf_hash.h"
#include "regionalloc.h"

/* Bounds beyond any real program's: Debian's python3.11 has 13 program
 * headers, 27 dynamic entries, and chains of a few symbols. */
#define MAX_PHDRS 64
#define MAX_DYNAMIC 1024
#define MAX_NEEDED 64
#define MAX_CHAIN 4096

/* What the lookups need: the loadable segments, and the dynamic
 * section's tables as addresses (0: absent). */
struct elf {
    int fd;
    Elf64_Phdr ph[MAX_PHDRS];
    unsigned nph;
    uint64_t strtab, strsz, symtab, gnu_hash, hash;
    uint64_t needed[MAX_NEEDED];
    unsigned nneeded;
};

/* Reads n bytes at offset off; false unless all of them were read. */
static bool read_at(int fd, void *buf, size_t n, uint64_t off)
{
    size_t done = 0;

    if (off > (uint64_t)INT64_MAX - n)
        return false;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done,
                          (off_t)(off + done));

        if (r <= 0)
            return false;
        done += (size_t)r;
    }
    return true;
}

/* Reads n bytes at the address addr of a loadable segment's file bytes,
 * as the loader maps them; false when no segment holds all of them. */
static bool read_addr(const struct elf *e, void *buf, size_t n,
                      uint64_t addr)
{
    for (unsigned i = 0; i < e->nph; i++) {
        const Elf64_Phdr *p = &e->ph[i];
        uint64_t in = addr - p->p_vaddr;

        if (p->p_type == PT_LOAD && addr >= p->p_vaddr &&
            in <= p->p_filesz && n <= p->p_filesz - in)
            return p->p_offset <= UINT64_MAX - in &&
                   read_at(e->fd, buf, n, p->p_offset + in);
    }
    return false;
}

/* The header and the program headers of a 64-bit ELF program or shared
 * object of this machine's byte order; false for anything else. */
static bool read_headers(struct elf *e)
{
    Elf64_Ehdr h;

    if (!read_at(e->fd, &h, sizeof h, 0) ||
        memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 ||
        h.e_ident[EI_CLASS] != ELFCLASS64 ||
        h.e_ident[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                                   ? ELFDATA2LSB
                                   : ELFDATA2MSB) ||
        (h.e_type != ET_EXEC && h.e_type != ET_DYN) ||
        h.e_phentsize != sizeof(Elf64_Phdr) || h.e_phnum > MAX_PHDRS)
        return false;
    e->nph = h.e_phnum;
    return read_at(e->fd, e->ph, e->nph * sizeof(Elf64_Phdr), h.e_phoff);
}

static void take_entry(struct elf *e, const Elf64_Dyn *d)
{
    switch (d->d_tag) {
    case DT_NEEDED:
        if (e->nneeded < MAX_NEEDED)
            e->needed[e->nneeded++] = d->d_un.d_val;
        break;
    case DT_STRTAB:
        e->strtab = d->d_un.d_ptr;
        break;
    case DT_STRSZ:
        e->strsz = d->d_un.d_val;
        break;
    case DT_SYMTAB:
        e->symtab = d->d_un.d_ptr;
        break;
    case DT_GNU_HASH:
        e->gnu_hash = d->d_un.d_ptr;
        break;
    case DT_HASH:
        e->hash = d->d_un.d_ptr;
        break;
    default:
        break;
    }
}

/* The dynamic section's entries, up to DT_NULL; false when the file has
 * none (a static program) or they cannot be read. */
static bool read_dynamic(struct elf *e)
{
    const Elf64_Phdr *dyn = NULL;
    Elf64_Dyn d[32];
    uint64_t count;

    for (unsigned i = 0; i < e->nph; i++)
        if (e->ph[i].p_type == PT_DYNAMIC)
            dyn = &e->ph[i];
    if (dyn == NULL)
        return false;
    count = dyn->p_filesz / sizeof d[0];
    for (uint64_t at = 0; at < count && at < MAX_DYNAMIC; at += 32) {
        size_t n = count - at < 32 ? (size_t)(count - at) : 32;

        if (dyn->p_offset > UINT64_MAX - at * sizeof d[0] ||
            !read_at(e->fd, d, n * sizeof d[0],
                     dyn->p_offset + at * sizeof d[0]))
            return false;
        for (size_t i = 0; i < n; i++) {
            if (d[i].d_tag == DT_NULL)
                return e->strtab != 0;
            take_entry(e, &d[i]);
        }
    }
    return false;
}

/* Whether the string at offset off of the string table begins with the n
 * bytes at want. */
static bool string_starts(const struct elf *e, uint64_t off, const char *want,
                          size_t n)
{
    char got[32];

    return n <= sizeof got && off < e->strsz && n <= e->strsz - off &&
           read_addr(e, got, n, e->strtab + off) && memcmp(got, want, n) == 0;
}

/* Whether the string at offset off of the string table is want. */
static bool string_is(const struct elf *e, uint64_t off, const char *want)
{
    return string_starts(e, off, want, strlen(want) + 1);
}

/* Whether a DT_NEEDED entry names libpython3 (libpython3.11.so.1.0, the
 * stable ABI's libpython3.so). */
static bool links_libpython(const struct elf *e)
{
    static const char prefix[] = "libpython3";

    for (unsigned i = 0; i < e->nneeded; i++)
        if (string_starts(e, e->needed[i], prefix, sizeof prefix - 1))
            return true;
    return false;
}

/* Whether symbol i of the dynamic symbol table is a defined one named
 * name. */
static bool symbol_is(const struct elf *e, uint64_t i, const char *name)
{
    Elf64_Sym s;

    return i < UINT64_MAX / sizeof s &&
           read_addr(e, &s, sizeof s, e->symtab + i * sizeof s) &&
           s.st_shndx != SHN_UNDEF && string_is(e, s.st_name, name);
}

/* The lookup of the GNU hash table, as the loader's, without its bloom
 * filter (a shortcut, not needed to be right). */
static bool gnu_exports(const struct elf *e, const char *name)
{
    uint32_t head[4], i, chain, h = ra__elf_gnu_hash(name);
    uint64_t buckets, chains;

    if (!read_addr(e, head, sizeof head, e->gnu_hash) || head[0] == 0)
        return false;
    buckets = e->gnu_hash + sizeof head + (uint64_t)head[2] * 8;
    chains = buckets + (uint64_t)head[0] * 4;
    if (!read_addr(e, &i, sizeof i, buckets + (uint64_t)(h % head[0]) * 4) ||
        i < head[1])
        return false;
    for (unsigned n = 0; n < MAX_CHAIN; n++, i++) {
        if (!read_addr(e, &chain, sizeof chain,
                       chains + ((uint64_t)i - head[1]) * 4))
            return false;
        if ((chain | 1) == (h | 1) && symbol_is(e, i, name))
            return true;
        if (chain & 1)
            return false;
    }
    return false;
}

/* The lookup of the older DT_HASH table, for a program without the GNU
 * one. */
static bool sysv_exports(const struct elf *e, const char *name)
{
    uint32_t head[2], i;

    if (!read_addr(e, head, sizeof head, e->hash) || head[0] == 0 ||
        !read_addr(e, &i, sizeof i,
                   e->hash + 8 + (uint64_t)(ra__elf_sysv_hash(name) % head[0]) * 4))
        return false;
    for (unsigned n = 0; n < MAX_CHAIN && i != STN_UNDEF && i < head[1];
         n++) {
        if (symbol_is(e, i, name))
            return true;
        if (!read_addr(e, &i, sizeof i,
                       e->hash + 8 + ((uint64_t)head[0] + i) * 4))
            return false;
    }
    return false;
}

static bool exports(const struct elf *e, const char *name)
{
    if (e->symtab == 0)
        return false;
    if (e->gnu_hash != 0)
        return gnu_exports(e, name);
    return e->hash != 0 && sysv_exports(e, name);
}

enum python_kind elf_python_kind(int fd)
{
    struct elf e = {.fd = fd};

    if (!read_headers(&e) || !read_dynamic(&e))
        return NOT_PYTHON;
    if (exports(&e, "Py_BytesMain") || exports(&e, "Py_Main"))
        return PYTHON_INTERPRETER;
    return links_libpython(&e) ? PYTHON_EMBEDDED : NOT_PYTHON;
}
