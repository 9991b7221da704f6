#!/usr/bin/env python3
"""check_include_cycles.py - fails when the project's files include each
other in a circle.

A module is a .c file and the .h of the same name in the same folder, with
its internal header X_internal.h beside them (store.c and store.h are one
module; detectors.c, detectors.h and detectors_internal.h another).  Module A depends on module B when a
file of A has `#include "b.h"` and b.h resolves to B: the including file's
own folder first, else every project header of that name (a name held by
two headers counts as a dependency on both).  The dependencies between
modules must form no circle: every strongly connected component of more
than one module is reported, with the includes that make it, and the
script exits 1.  Angle-bracket includes (system and library headers) are
not the project's and are not followed.

    check_include_cycles.py [SOURCE_DIR]   (default: the script's project)
    check_include_cycles.py --self-test    (finds the circles of a made-up
                                            tree, and none where none is)

Run by ctest as layout.no_include_cycles.
"""
import os
import re
import sys

# Folders of the project's own C code, relative to the top.
ROOTS = ("src", "include", "tests", "bench", "fuzz", "python", "examples")

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)

# Circles known and being opened, each as the set of its modules
# (paths without extension, relative to the top).  An entry here does not
# fail the check; one that no longer occurs is reported so that it can be
# removed.
ALLOWED = []  # none today


def project_files(top):
    """Every .c and .h file under ROOTS, relative to TOP."""
    out = []
    for root in ROOTS:
        base = os.path.join(top, root)
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                             and d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(folder, name), top))
    return out


def module_of(path):
    stem = os.path.splitext(path)[0]
    return stem[:-len("_internal")] if stem.endswith("_internal") else stem


def dependencies(top, files):
    """{module: {module: [(file, included name), ...]}} for the includes
    between distinct modules."""
    headers = {}
    for f in files:
        if f.endswith(".h"):
            headers.setdefault(os.path.basename(f), []).append(f)
    deps = {module_of(f): {} for f in files}
    for f in files:
        with open(os.path.join(top, f), encoding="utf-8",
                  errors="replace") as fh:
            text = fh.read()
        for name in INCLUDE.findall(text):
            local = os.path.normpath(os.path.join(os.path.dirname(f), name))
            if local in deps or os.path.exists(os.path.join(top, local)):
                targets = [local]
            else:
                targets = headers.get(os.path.basename(name), [])
            for t in targets:
                a, b = module_of(f), module_of(t)
                if a != b:
                    deps[a].setdefault(b, []).append((f, name))
                    deps.setdefault(b, {})
    return deps


def circles(deps):
    """The strongly connected components of more than one module (Tarjan,
    iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in sorted(deps):
        if start in index:
            continue
        work = [(start, iter(sorted(deps[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(deps[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def self_test():
    """The check on small made-up trees: a circle through three modules
    (a.c -> b.h, b.c -> c.h, c.c -> a.h) is found, with a module's own
    header and a header-only module in between not counted; the same tree
    without the closing include has none."""
    import tempfile
    tree = {
        "src/x/a.c": '#include "a.h"\n#include "b.h"\n',
        "src/x/a.h": '#include "types.h"\n',
        "src/x/types.h": "",
        "src/x/b.c": '#include "b.h"\n#include "c.h"\n',
        "src/x/b.h": "",
        "src/x/c.c": '#include "c.h"\n#include "a.h"\n',
        "src/x/c.h": '#include "types.h"\n',
        "src/y/d.c": '#include <stdio.h>\n#include "c.h"\n',
    }
    ok = True
    with tempfile.TemporaryDirectory() as top:
        for path, text in tree.items():
            os.makedirs(os.path.join(top, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(top, path), "w") as fh:
                fh.write(text)
        found = circles(dependencies(top, project_files(top)))
        ok &= found == [["src/x/a", "src/x/b", "src/x/c"]]
        with open(os.path.join(top, "src/x/c.c"), "w") as fh:
            fh.write('#include "c.h"\n')
        ok &= circles(dependencies(top, project_files(top))) == []
    print("check_include_cycles self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    top = os.path.abspath(argv[1] if len(argv) > 1 else
                          os.path.join(os.path.dirname(__file__), ".."))
    files = project_files(top)
    if not files:
        print(f"check_include_cycles: no C files under {top}", file=sys.stderr)
        return 2
    deps = dependencies(top, files)
    found = circles(deps)
    bad = [c for c in found if set(c) not in ALLOWED]
    for allowed in ALLOWED:
        if sorted(allowed) not in found:
            print("check_include_cycles: the allowed circle "
                  f"{', '.join(sorted(allowed))} no longer occurs: remove it "
                  "from ALLOWED")
    for comp in found:
        tag = "allowed (being removed)" if set(comp) in ALLOWED else "CIRCLE"
        print(f"{tag}: {' <-> '.join(comp)}")
        for a in comp:
            for b in comp:
                for f, name in deps[a].get(b, []):
                    print(f"    {f} includes \"{name}\" ({b})")
    print(f"check_include_cycles: {len(files)} files, {len(deps)} modules, "
          f"{len(bad)} circle(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
