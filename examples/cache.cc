// The C++ face of the library (<regionalloc.hpp>): a parse phase under a
// pushed tag, and a cache whose container keeps its memory in its own tag
// whatever is pushed. Prints what each tag holds.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <regionalloc.hpp>

namespace {

struct row {
    long id;
    double value;
    char label[48];
};

std::vector<std::string> parse(const std::string &text)
{
    std::vector<std::string> words;
    std::string word;

    for (char c : text) {
        if (c == ' ') {
            words.push_back(word);
            word.clear();
        } else {
            word += c;
        }
    }
    return words;
}

} // namespace

int main()
{
    ra::tag tag_parse("parse"), tag_cache("cache");
    std::vector<row, ra::tag_allocator<row>> cache{
        ra::tag_allocator<row>(tag_cache)};
    std::size_t nwords;

    {
        ra::tag_scope in(tag_parse); // every new/malloc here is "parse"'s
        std::string text;
        for (int i = 0; i < 20000; i++)
            text += "lorem ipsum dolor sit amet ";
        auto words = parse(text);
        nwords = words.size();
        cache.resize(100000); // still "cache"'s, though "parse" is pushed
    }
    std::printf("parsed %zu words\n", nwords);
    std::printf("parse: %zu bytes allocated (all freed)\n",
                tag_parse.stats().allocated);
    std::printf("cache: %zu bytes allocated for %zu rows of %zu bytes, "
                "%zu resident\n",
                tag_cache.stats().allocated, cache.size(), sizeof(row),
                tag_cache.rss());
    std::printf("cache.data() belongs to \"%s\"\n",
                ra::tag::of(cache.data()).name().c_str());
    return 0;
}
