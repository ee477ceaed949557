#!/usr/bin/env python3
"""The layering rule of a crate, checked from its `use` lines: no circle of imports spans two of
its top-level modules, and none imports from a layer above its own (README.md, "Layout").

    python3 scripts/layers.py crates/server/src [--show]

Each `crate::a::…` path in a module's code (comments and `#[cfg(test)]` blocks left out; a name
the crate root re-exports, `crate::Name`, counts as its module) is an arrow from the module's
top-level module to `a`. Exits 1, naming the modules and the imports that tie them, if the
arrows between top-level modules make a circle; `--show` also prints every module with what it
imports, bottom first.

A crate root (lib.rs or main.rs) may declare its layers, bottom first, one comment line each:

    // layer: error storage options
    // layer: tree

Then every top-level module must be in one of them (a new module takes its place in the
declaration), and an arrow from a module to one of a higher layer fails too, naming the files.
Modules of one layer may import each other (the circle check still holds between them).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PATH = re.compile(r"\bcrate::([A-Za-z_][A-Za-z0-9_]*)")
# `use crate::{a::X, b}` and the like: every `ident::` or bare ident at the start of an item.
GROUP = re.compile(r"\buse\s+crate::\{([^;]*)\};", re.S)
REEXPORT = re.compile(r"^\s*pub\s+use\s+([A-Za-z_][A-Za-z0-9_]*)::(.+?);", re.M | re.S)


def code_of(text: str) -> str:
    """The file without comments and without its `#[cfg(test)]` items."""
    out = []
    skip_depth = None
    depth = 0
    pending_test = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            continue
        line = line.split("//", 1)[0] if "://" not in line else line
        if skip_depth is None and stripped.startswith("#[cfg(test)]"):
            pending_test = True
            continue
        opens, closes = line.count("{"), line.count("}")
        if pending_test and skip_depth is None:
            if opens == 0 and stripped.endswith(";"):
                pending_test = False  # `#[cfg(test)] mod tests;` or a single item
                continue
            if opens:
                skip_depth = depth
                pending_test = False
        depth += opens - closes
        if skip_depth is not None:
            if depth <= skip_depth:
                skip_depth = None
            continue
        out.append(line)
    return "\n".join(out)


def reexports(root: Path) -> dict[str, str]:
    """Names the crate root re-exports, each with the top-level module it comes from."""
    names: dict[str, str] = {}
    lib = root / "lib.rs"
    if not lib.exists():
        return names
    for module, rest in REEXPORT.findall(code_of(lib.read_text())):
        for name in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:[,}]|$)", rest):
            names.setdefault(name, module)
    return names


LAYER = re.compile(r"^\s*//\s*layer:\s*(.+)$", re.M)


def declared_layers(root: Path) -> list[list[str]]:
    """The layers the crate root declares, bottom first (none: no order to check)."""
    for name in ("lib.rs", "main.rs"):
        lib = root / name
        if lib.exists():
            return [line.split() for line in LAYER.findall(lib.read_text())]
    return []


def upward(graph: dict[str, dict[str, set[str]]], layers: list[list[str]]) -> list[str]:
    """What breaks the declared order: modules no layer names, names no module has, and
    arrows up."""
    rank = {m: i for i, layer in enumerate(layers) for m in layer}
    problems = [f"{m}: in no declared layer" for m in sorted(graph) if m not in rank]
    problems += [f"{m}: declared, but no such module" for m in sorted(rank) if m not in graph]
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if a in rank and b in rank and rank[b] > rank[a]:
                files = ", ".join(sorted(graph[a][b]))
                problems.append(f"{a} (layer {rank[a] + 1}) imports {b} (layer {rank[b] + 1}): {files}")
    return problems


def module_of(root: Path, file: Path) -> str | None:
    rel = file.relative_to(root)
    if rel.parts == ("lib.rs",) or rel.parts == ("main.rs",):
        return None
    return rel.parts[0].removesuffix(".rs")


def arrows(root: Path) -> dict[str, dict[str, set[str]]]:
    """Top-level module -> imported top-level module -> the files that import it."""
    roots = reexports(root)
    modules = {module_of(root, f) for f in root.rglob("*.rs")} - {None}
    graph: dict[str, dict[str, set[str]]] = {m: {} for m in modules}
    for file in sorted(root.rglob("*.rs")):
        me = module_of(root, file)
        if me is None:
            continue
        code = code_of(file.read_text())
        targets = set(PATH.findall(code))
        for group in GROUP.findall(code):
            targets.update(re.findall(r"(?:^|[,{]\s*)([A-Za-z_][A-Za-z0-9_]*)", group))
        for target in targets:
            to = target if target in modules else roots.get(target)
            if to and to != me and to in modules:
                graph[me].setdefault(to, set()).add(str(file.relative_to(root)))
    return graph


def circles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(args[0])
    graph = arrows(root)
    if "--show" in sys.argv:
        for m in sorted(graph, key=lambda m: (len(graph[m]), m)):
            print(f"{m}: {', '.join(sorted(graph[m])) or '-'}")
    found = circles(graph)
    for comp in found:
        print(f"{root}: a circle of {len(comp)} modules: {', '.join(comp)}")
        for a in comp:
            for b in sorted(graph[a]):
                if b in comp:
                    print(f"  {a} -> {b}: {', '.join(sorted(graph[a][b]))}")
    layers = declared_layers(root)
    wrong = upward(graph, layers) if layers else []
    for problem in wrong:
        print(f"{root}: {problem}")
    if not found and not wrong:
        order = f", in {len(layers)} layers" if layers else ""
        print(f"{root}: {len(graph)} top-level modules, no circle{order}")
    return 1 if found or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
