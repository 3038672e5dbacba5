// Floor: API. C++ operator new/delete, every variant, routed through the
// tag machinery.
// Debian's libjemalloc exports this family too; exporting it here keeps C++
// allocations tagged when the program links jemalloc after us.
#include <cstddef>
#include <new>

#include "regionalloc.h"

// paths.h's, for an entry that names its caller (tags by calling object):
// operator new cannot end in a tail call, as it must throw.
extern "C" void *ra__alloc_from(const void *caller, std::size_t align,
                                std::size_t size)
    __attribute__((visibility("hidden")));

namespace {

// The standard's loop: call the new-handler until it succeeds or there is
// none, then throw. caller: operator new's return address.
void *allocate_or_throw(std::size_t size, std::size_t align,
                        const void *caller)
{
    for (;;) {
        void *p = ra__alloc_from(caller, align, size);
        if (p != nullptr)
            return p;
        std::new_handler handler = std::get_new_handler();
        if (handler == nullptr)
            throw std::bad_alloc();
        handler();
    }
}

void *allocate_or_null(std::size_t size, std::size_t align,
                       const void *caller) noexcept
{
    try {
        return allocate_or_throw(size, align, caller);
    } catch (...) {
        return nullptr;
    }
}

} // namespace

RA_EXPORT void *operator new(std::size_t size)
{
    return allocate_or_throw(size, 0, __builtin_return_address(0));
}

RA_EXPORT void *operator new[](std::size_t size)
{
    return allocate_or_throw(size, 0, __builtin_return_address(0));
}

RA_EXPORT void *operator new(std::size_t size,
                                 const std::nothrow_t &) noexcept
{
    return allocate_or_null(size, 0, __builtin_return_address(0));
}

RA_EXPORT void *operator new[](std::size_t size,
                                   const std::nothrow_t &) noexcept
{
    return allocate_or_null(size, 0, __builtin_return_address(0));
}

RA_EXPORT void *operator new(std::size_t size, std::align_val_t align)
{
    return allocate_or_throw(size, static_cast<std::size_t>(align),
                             __builtin_return_address(0));
}

RA_EXPORT void *operator new[](std::size_t size, std::align_val_t align)
{
    return allocate_or_throw(size, static_cast<std::size_t>(align),
                             __builtin_return_address(0));
}

RA_EXPORT void *operator new(std::size_t size, std::align_val_t align,
                                 const std::nothrow_t &) noexcept
{
    return allocate_or_null(size, static_cast<std::size_t>(align),
                             __builtin_return_address(0));
}

RA_EXPORT void *operator new[](std::size_t size, std::align_val_t align,
                                   const std::nothrow_t &) noexcept
{
    return allocate_or_null(size, static_cast<std::size_t>(align),
                             __builtin_return_address(0));
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
