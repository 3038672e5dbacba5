// Floor: API. C++ operator new/delete, every variant, routed through the
// tag machinery.
// Debian's libjemalloc exports this family too; exporting it here keeps C++
// allocations tagged when the program links jemalloc after us.
#include <cstddef>
#include <new>

#include "regionalloc.h"

namespace {

// The standard's loop: call the new-handler until it succeeds or there is
// none, then throw.
void *allocate_or_throw(std::size_t size, std::size_t align)
{
    for (;;) {
        void *p = align == 0 ? ra_malloc(size)
                             : ra_aligned_alloc(align, size);
        if (p != nullptr)
            return p;
        std::new_handler handler = std::get_new_handler();
        if (handler == nullptr)
            throw std::bad_alloc();
        handler();
    }
}

void *allocate_or_null(std::size_t size, std::size_t align) noexcept
{
    try {
        return allocate_or_throw(size, align);
    } catch (...) {
        return nullptr;
    }
}

} // namespace

RA_EXPORT void *operator new(std::size_t size)
{
    return allocate_or_throw(size, 0);
}

RA_EXPORT void *operator new[](std::size_t size)
{
    return allocate_or_throw(size, 0);
}

RA_EXPORT void *operator new(std::size_t size,
                                 const std::nothrow_t &) noexcept
{
    return allocate_or_null(size, 0);
}

RA_EXPORT void *operator new[](std::size_t size,
                                   const std::nothrow_t &) noexcept
{
    return allocate_or_null(size, 0);
}

RA_EXPORT void *operator new(std::size_t size, std::align_val_t align)
{
    return allocate_or_throw(size, static_cast<std::size_t>(align));
}

RA_EXPORT void *operator new[](std::size_t size, std::align_val_t align)
{
    return allocate_or_throw(size, static_cast<std::size_t>(align));
}

RA_EXPORT void *operator new(std::size_t size, std::align_val_t align,
                                 const std::nothrow_t &) noexcept
{
    return allocate_or_null(size, static_cast<std::size_t>(align));
}

RA_EXPORT void *operator new[](std::size_t size, std::align_val_t align,
                                   const std::nothrow_t &) noexcept
{
    return allocate_or_null(size, static_cast<std::size_t>(align));
}

RA_EXPORT void operator delete(void *p) noexcept { ra_free(p); }
RA_EXPORT void operator delete[](void *p) noexcept { ra_free(p); }

RA_EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept
{
    ra_free(p);
}

RA_EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept
{
    ra_free(p);
}

RA_EXPORT void operator delete(void *p, std::size_t size) noexcept
{
    ra_free_sized(p, size);
}

RA_EXPORT void operator delete[](void *p, std::size_t size) noexcept
{
    ra_free_sized(p, size);
}

// Aligned blocks are freed without the size hint: the hint would need the
// alignment too, and ra_free finds both from the block itself.
RA_EXPORT void operator delete(void *p, std::align_val_t) noexcept
{
    ra_free(p);
}

RA_EXPORT void operator delete[](void *p, std::align_val_t) noexcept
{
    ra_free(p);
}

RA_EXPORT void operator delete(void *p, std::align_val_t,
                                   const std::nothrow_t &) noexcept
{
    ra_free(p);
}

RA_EXPORT void operator delete[](void *p, std::align_val_t,
                                     const std::nothrow_t &) noexcept
{
    ra_free(p);
}

RA_EXPORT void operator delete(void *p, std::size_t,
                                   std::align_val_t) noexcept
{
    ra_free(p);
}

RA_EXPORT void operator delete[](void *p, std::size_t,
                                     std::align_val_t) noexcept
{
    ra_free(p);
}
