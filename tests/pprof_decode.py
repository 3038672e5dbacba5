"""A decoder of gzip-compressed profile.proto (pprof) files, for the shell
tests: enough of protobuf's wire format for what the library writes
(varints and length-delimited fields), and nothing trusted: a malformed
message raises ValueError. No packages beyond the standard library."""
import gzip


def varint(buf, i):
    """The varint at buf[i]: (value, index after it)."""
    v = shift = 0
    while True:
        if i >= len(buf):
            raise ValueError("varint runs past the end")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i
        if shift > 63:
            raise ValueError("varint longer than ten bytes")


def fields(buf):
    """(field number, wire type, value) of each field of a message: ints
    for varints, bytes for length-delimited fields."""
    i, out = 0, []
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 2:
            n, i = varint(buf, i)
            if i + n > len(buf):
                raise ValueError("field %d: cut short" % field)
            v = buf[i:i + n]
            i += n
        else:
            raise ValueError("field %d: unexpected wire type %d" % (field, wire))
        out.append((field, wire, v))
    return out


def message(buf, repeated=(), packed=()):
    """A dict field -> value (the last wins) or list (repeated fields;
    packed ones decoded)."""
    d = {f: [] for f in repeated + packed}
    for f, wire, v in fields(buf):
        if f in packed:
            if wire == 2:
                j = 0
                while j < len(v):
                    x, j = varint(v, j)
                    d[f].append(x)
            else:
                d[f].append(v)
        elif f in repeated:
            d[f].append(v)
        else:
            d[f] = v
    return d


def profile(data):
    """The profile in data (gzip'd bytes): a dict with "strings", "types"
    (sample types as (type, unit) names), "samples" (each a dict: "values",
    "labels" {key: value} of string labels, "locations"), "mappings" (each
    a dict: "filename", "build_id")."""
    raw = gzip.decompress(data)
    p = message(raw, repeated=(1, 2, 3, 4, 5, 6, 13))
    strings = [s.decode("utf-8") for s in p[6]]
    if not strings or strings[0] != "":
        raise ValueError("string_table[0] is not empty")

    def s(i):
        return strings[i]

    types = []
    for t in p[1]:
        m = message(t)
        types.append((s(m.get(1, 0)), s(m.get(2, 0))))
    samples = []
    for raw_sample in p[2]:
        m = message(raw_sample, repeated=(3,), packed=(1, 2))
        labels = {}
        for raw_label in m[3]:
            lab = message(raw_label)
            if lab.get(2, 0):
                labels[s(lab[1])] = s(lab[2])
        samples.append({"values": m[2], "labels": labels, "locations": m[1]})
    mappings = []
    for raw_mapping in p[3]:
        m = message(raw_mapping)
        mappings.append({"filename": s(m.get(5, 0)), "build_id": s(m.get(6, 0))})
    return {"strings": strings, "types": types, "samples": samples,
            "mappings": mappings}
