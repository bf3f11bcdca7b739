"""The gguf package's view of a GGUF file lathe wrote (see scripts/gguf-py-check.sh)."""
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def main(argv):
    path, ref, keys = argv[0], None, []
    rest = argv[1:]
    while rest:
        if rest[0] == "--expect-key":
            keys.append(rest[1])
            rest = rest[2:]
        else:
            ref, rest = rest[0], rest[1:]
    r = GGUFReader(path)
    for k in keys:
        if k not in r.fields:
            print(f"FAIL: {path}: gguf reader finds no key {k}")
            return 1
    want = np.fromfile(ref, dtype=np.float32) if ref else None
    at, bad = 0, 0
    types = set()
    for t in r.tensors:
        x = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        if x.size != int(np.prod(t.shape)):
            print(f"FAIL: {t.name}: {x.size} values for shape {list(t.shape)}")
            return 1
        types.add(t.tensor_type.name)
        if want is not None:
            w = want[at:at + x.size]
            at += x.size
            if w.size != x.size or not np.array_equal(w.view(np.uint32), x.view(np.uint32)):
                n = int(np.sum(w.view(np.uint32) != x.view(np.uint32))) if w.size == x.size else -1
                print(f"FAIL: {t.name} ({t.tensor_type.name}): {n} of {x.size} values differ from lathe's")
                bad += 1
    if want is not None and at != want.size:
        print(f"FAIL: {ref} holds {want.size} values, the file's tensors {at}")
        return 1
    if bad:
        return 1
    print(f"ok: gguf {path}: {len(r.tensors)} tensors ({', '.join(sorted(types))}), {len(r.fields)} keys"
          + (", dequantized bit for bit as lathe" if want is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
