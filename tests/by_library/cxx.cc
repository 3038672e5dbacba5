// A test library of check_by_library: every operator new, called from this
// object's code, and the matching delete.
#include <cstddef>
#include <new>

extern "C" void bylib_new(int v, std::size_t size, void **out);
extern "C" void bylib_delete(int v, void *p);

static const std::align_val_t align{64};

extern "C" void bylib_new(int v, std::size_t size, void **out)
{
    void *p = nullptr;

    switch (v) {
    case 0: p = ::operator new(size); break;
    case 1: p = ::operator new[](size); break;
    case 2: p = ::operator new(size, std::nothrow); break;
    case 3: p = ::operator new[](size, std::nothrow); break;
    case 4: p = ::operator new(size, align); break;
    case 5: p = ::operator new[](size, align); break;
    case 6: p = ::operator new(size, align, std::nothrow); break;
    case 7: p = ::operator new[](size, align, std::nothrow); break;
    default: break;
    }
    *out = p;
}

extern "C" void bylib_delete(int v, void *p)
{
    if (v < 4)
        ::operator delete(p);
    else
        ::operator delete(p, align);
}
