#!/usr/bin/env python3
"""Size report of src/: total lines, files over 800 lines, functions over 120 lines.
Exits 1 when a file has more than 1,000 lines or a function more than 200 (the project's hard limits).
A function is a top-level definition: a line at column 0 that opens a parameter list, through the
first line that is a lone '}' at column 0 (the code's style, enforced by .clang-format)."""
import glob
import re
import sys

FILE_WARN, FILE_MAX, FN_WARN, FN_MAX = 800, 1000, 120, 200
DECL_START = re.compile(r'^[A-Za-z_][\w\s\*,()\[\]]*\(')
NOT_FN = re.compile(r'^(typedef|struct\s+\w+\s*\{|enum|union|#|return|if|for|while|switch|else)\b')


def functions(lines):
    """Yields (name, first line, line count) for each function definition."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if DECL_START.match(line) and not NOT_FN.match(line):
            j = i
            while j < len(lines) and '{' not in lines[j] and ';' not in lines[j]:
                j += 1
            if j < len(lines) and '{' in lines[j] and ';' not in lines[j].split('{')[0]:
                k = j
                while k < len(lines) and lines[k].rstrip() != '}' and not (k == j and lines[k].rstrip().endswith('}')):
                    k += 1
                name = re.findall(r'(\w+)\s*\(', line)
                yield (name[0] if name else '?'), i + 1, k - i + 1
                i = k + 1
                continue
        i += 1


def main():
    files = sorted(glob.glob('src/**/*.[ch]', recursive=True))
    total, bad = 0, []
    big_files, long_fns = [], []
    for path in files:
        with open(path, encoding='utf-8', errors='replace') as f:
            lines = f.read().split('\n')
        n = len(lines) - (1 if lines and lines[-1] == '' else 0)
        total += n
        if n > FILE_WARN:
            big_files.append((n, path))
        if n > FILE_MAX:
            bad.append(f'{path}: {n} lines (limit {FILE_MAX})')
        for name, start, length in functions(lines):
            if length > FN_WARN:
                long_fns.append((length, f'{path}:{start} {name}'))
            if length > FN_MAX:
                bad.append(f'{path}:{start}: function {name} has {length} lines (limit {FN_MAX})')
    print(f'size: {total} lines in {len(files)} files under src/')
    for n, p in sorted(big_files, reverse=True):
        print(f'size: file over {FILE_WARN} lines: {p} ({n})')
    for n, p in sorted(long_fns, reverse=True):
        print(f'size: function over {FN_WARN} lines: {p} ({n})')
    for b in bad:
        print(f'size: error: {b}')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
