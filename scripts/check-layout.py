#!/usr/bin/env python3
"""The house rules of the source tree (docs/adr/0015), checked in CI.

- Floors: core < adapters < services < edges < bin. A crate depends only on
  crates of its own floor or below (loadtests may use anything), and no
  adapter on another adapter: each implements core's ports, and the binary
  wires them together (their tests may use one another). The one kind of
  crate adapters may share is a library that implements no port
  (`SHARED_ADAPTER_LIBRARIES`; checked). A service depends
  on no adapter: every port it uses is defined in roncho-core.
- Within a crate, no circle of files: `crate::`, `super::` (`super::*`
  too) and `self::` paths, and a parent's uses of its child modules'
  items, form a graph without cycles. The crate root, which declares the
  modules and re-exports their items, is left out.
- The largest trait in roncho-core has at most 30 methods, and no port asks
  what it is: a trait method of roncho-core that takes nothing but `&self`
  and answers `bool` is a capability question, and the caller then
  branches on the adapter's kind (issue 59: a store plans behind one
  method instead).
- No source file outside tests is over 1,200 lines (a trailing test module
  does not count), and no function outside tests is over 150 lines; in the
  services and the edges, where the domain's and the wires' logic is read
  most, 800 lines and 100 lines (issue 59).

Exits non-zero with every breach listed. `KNOWN` names the breaches that
later steps of issue 34 remove; a breach listed there that is gone fails
too, so the list only shrinks.
"""

import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FLOORS = ["core", "adapters", "services", "edges", "bin"]
MAX_TRAIT_METHODS = 30
MAX_FILE_LINES = 1200
MAX_FN_LINES = 150
# The stricter limits of the floors read most: (file lines, function lines).
FLOOR_LIMITS = {"services": (800, 100), "edges": (800, 100)}
# Crates no wire owns, and the wire crates they must not link: the gate and
# the REST and MCP edges speak HTTP/JSON, never gRPC's stack.
WIRE_NEUTRAL_FLOORS = ["core", "services"]
WIRE_NEUTRAL_CRATES = ["roncho-gate", "roncho-rest", "roncho-mcp"]
GRPC_STACK = {"tonic", "roncho-proto", "roncho-api"}

# Crates of the adapters' floor that implement no port and that adapters may
# use: plumbing every provider client shares. The check holds that they
# implement no trait of roncho-core.
SHARED_ADAPTER_LIBRARIES = {
    "roncho-http": "the HTTP client rules (retries, trace context) every provider client shares",
}

# Breaches allowed for now (none since issue 34): one listed here that is
# gone fails too, so the list only shrinks.
KNOWN: set[str] = set()


def crates():
    """Every workspace crate: (floor, directory, package name)."""
    for floor in FLOORS:
        base = ROOT / floor
        if not base.is_dir():
            continue
        for manifest in sorted(base.glob("*/Cargo.toml")):
            name = re.search(r'(?m)^name\s*=\s*"([^"]+)"', manifest.read_text()).group(1)
            yield floor, manifest.parent, name


def dependencies(manifest_text, kinds=r"(?:dev-|build-)?"):
    """Workspace crates a manifest depends on (normal, dev and build; or
    the sections `kinds` matches)."""
    names = set()
    for section in re.finditer(rf"(?ms)^\[{kinds}dependencies\]\n(.*?)(?=^\[|\Z)", manifest_text):
        names.update(re.findall(r"(?m)^(roncho[\w-]*)\s*[.=]", section.group(1)))
    return names


def code_lines(text):
    """The lines of a file before its trailing `#[cfg(test)]` module: one
    whose block ends the file (a test module mid-file counts as code)."""
    for cut in reversed(list(re.finditer(r"(?m)^#\[cfg\(test\)\]\s*\n(?:#\[[^\n]*\]\s*\n)*mod \w+\s*\{", text))):
        rest = strip_literals(text[cut.end() - 1 :])
        if rest[block_end(rest, 0) + 1 :].strip() == "":
            return text[: cut.start()]
        return text
    return text


def strip_literals(text):
    """Blanks comments, strings and chars (keeping line breaks), so braces count."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i) + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        raw = re.match(r'b?r(#*)"', text[i : i + 12])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = '"' + raw.group(1)
            j = text.find(close, i + len(raw.group(0))) + len(close)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if text[i] == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        char = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'])'", text[i : i + 12])
        if char:
            out.append("' '")
            i += len(char.group(0))
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def long_functions(text, limit=MAX_FN_LINES):
    """(name, lines) of every fn body longer than `limit`, outside test modules."""
    code = strip_literals(code_lines(text))
    found = []
    for m in re.finditer(r"\bfn\s+(\w+)[^;{]*\{", code):
        depth, i = 0, m.end() - 1
        while True:
            if code[i] == "{":
                depth += 1
            elif code[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        lines = code.count("\n", m.start(), i) + 1
        if lines > limit:
            found.append((m.group(1), lines))
    return found


def module_of(src, path):
    rel = path.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("lib", "main", "mod"):
        parts = parts[:-1]
    return "::".join(parts)


def file_cycles(src):
    """Circles of files in one crate's `src`."""
    files = {module_of(src, p): p for p in src.rglob("*.rs")}
    edges = {m: set() for m in files}
    for me, path in files.items():
        code = strip_literals(code_lines(path.read_text()))
        here = me.split("::") if me else []
        # Paths from the crate root, the parent (`super::x`, `super::*`) or
        # this module; and a child module's items used by name (`child::x`).
        children = re.findall(r"(?m)^\s*(?:pub(?:\([^)]*\))? )?mod (\w+);", code)
        paths = [(m.group(1), m.group(2)) for m in re.finditer(r"\b(crate|super|self)((?:::(?:\w+|\*))+)", code)]
        paths += [("self", "::" + m.group(0)) for child in children for m in re.finditer(rf"(?<![\w:]){child}(?:::\w+)+", code)]
        for head, rest in paths:
            base = [] if head == "crate" else list(here)
            if head == "super":
                base = base[:-1]
            parts = base + [part for part in rest.strip(":").split("::") if part != "*"]
            for k in range(len(parts), -1, -1):
                target = "::".join(parts[:k])
                if target in files:
                    if target != me and target != "":
                        edges[me].add(target)
                    break
    cycles, state, stack = [], {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(edges[u]):
            if state.get(v) == 1:
                cycles.append(stack[stack.index(v) :] + [v])
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(files):
        if u not in state:
            visit(u)
    return cycles


_METADATA = None


def metadata():
    """`cargo metadata` of the workspace (read once)."""
    global _METADATA
    if _METADATA is None:
        out = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
        _METADATA = json.loads(out)
    return _METADATA


def resolved_dependencies(normal_only):
    """By package name, the package names it depends on directly, as cargo
    resolves them (every spelling of a manifest: renames, target tables,
    dotted keys): normal dependencies only, or of every kind."""
    meta = metadata()
    name_of = {package["id"]: package["name"] for package in meta["packages"]}
    return {
        name_of[node["id"]]: {
            name_of[dep["pkg"]] for dep in node["deps"]
            if not normal_only or any(kind["kind"] is None for kind in dep["dep_kinds"])
        }
        for node in meta["resolve"]["nodes"]
    }


def grpc_links(names):
    """For each crate in `names`, the gRPC-stack crates it links (normal
    dependencies, transitively), from `cargo metadata`."""
    meta = metadata()
    name_of = {package["id"]: package["name"] for package in meta["packages"]}
    deps = {
        node["id"]: [
            dep["pkg"] for dep in node["deps"]
            if any(kind["kind"] is None for kind in dep["dep_kinds"])
        ]
        for node in meta["resolve"]["nodes"]
    }
    links = {}
    for start in (i for i, name in name_of.items() if name in names):
        seen, todo = set(), [start]
        while todo:
            for dep in deps.get(todo.pop(), []):
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        links[name_of[start]] = sorted({name_of[i] for i in seen} & GRPC_STACK)
    return links


def block_end(code, open_at):
    """The index of the `}` closing the `{` at `open_at` in literal-free `code`."""
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(code)


def trait_bodies(core_src):
    """(trait name, body) of every trait in core, outside test modules."""
    for path in core_src.rglob("*.rs"):
        code = strip_literals(code_lines(path.read_text()))
        for m in re.finditer(r"\btrait\s+(\w+)[^{;]*\{", code):
            yield m.group(1), code[m.end() : block_end(code, m.end() - 1)]


def largest_trait(core_src):
    best = ("", 0)
    for trait, body in trait_bodies(core_src):
        # Methods at the body's own level: `fn` outside any nested block.
        depth, methods = 0, 0
        for i, char in enumerate(body):
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            elif depth == 0 and body.startswith("fn ", i) and (i == 0 or not body[i - 1].isalnum()):
                methods += 1
        if methods > best[1]:
            best = (trait, methods)
    return best


# Methods of roncho-core's traits that take nothing but `self` and are not
# questions about what the adapter is: each says what it answers instead.
SELF_ONLY_METHODS = {
    ("Llm", "model_id"): "which model answered, for provenance and metrics",
    ("Embedder", "model_id"): "which model made the vectors, checked against the store's",
    ("Embedder", "dimensions"): "the vectors' size, checked against the store's",
    ("DeliveryLedger", "installation"): "the database's id, which stream message ids carry",
    ("QueryParts", "meaning"): "computes the query's embedding",
    ("QueryParts", "names"): "looks up the peers a query names",
    ("Health", "info"): "what the store holds, for `roncho status`",
    ("Health", "ping"): "whether the store answers, for readiness",
    ("SyncLedger", "text_index_mark"): "how far the text index has read",
    ("SyncLedger", "text_index_backlog"): "how many rows the text index has still to read",
    ("DerivationHealth", "degraded_derivations"): "the workspaces whose derivation is degraded",
}


def capability_questions(core_src):
    """(trait, method) of every trait method in core that takes nothing but
    `self` (`&self`, `&'a self`, `&mut self`, `self: &Self`, ...), answers
    something, and is not in SELF_ONLY_METHODS: a question about what the
    adapter is (whatever its answer's type: `bool`, `Result<bool>`, an
    enum of kinds)."""
    # Taking nothing but self and answering something (a method without
    # `->` is a command, or a wait).
    self_only = r"\bfn\s+(\w+)\s*(?:<[^>]*>)?\s*\(\s*(?:&\s*(?:'\w+\s+)?(?:mut\s+)?self|(?:mut\s+)?self(?:\s*:\s*[^,)]*)?)\s*,?\s*\)\s*->"
    found = []
    for trait, body in trait_bodies(core_src):
        for q in re.finditer(self_only, body):
            if (trait, q.group(1)) not in SELF_ONLY_METHODS:
                found.append((trait, q.group(1)))
    return sorted(found)


def ports_implemented(src, ports):
    """The traits of `ports` that a crate's sources implement (`impl ... Port for`)."""
    found = set()
    for path in sorted(src.rglob("*.rs")):
        code = strip_literals(path.read_text())
        for m in re.finditer(r"\bimpl\b[^{;]*?\b(\w+)(?:<[^{;]*>)?\s+for\b", code):
            if m.group(1) in ports:
                found.add(m.group(1))
    return found


def main():
    breaches = []
    ports = {trait for trait, _ in trait_bodies(ROOT / "core/roncho-core/src")}
    all_crates = list(crates())
    floor_of = {name: floor for floor, _, name in all_crates}
    normal, every_kind = resolved_dependencies(True), resolved_dependencies(False)
    for floor, directory, name in all_crates:
        manifest = (directory / "Cargo.toml").read_text()
        for dep in dependencies(manifest) | every_kind.get(name, set()):
            if dep != name and dep in floor_of and FLOORS.index(floor_of[dep]) > FLOORS.index(floor):
                breaches.append(f"floor {name} ({floor}) depends on {dep} ({floor_of[dep]})")
        for dep in normal.get(name, set()):
            if (
                floor == "adapters"
                and dep != name
                and floor_of.get(dep) == "adapters"
                and dep not in SHARED_ADAPTER_LIBRARIES
            ):
                breaches.append(f"adapter {name} depends on adapter {dep}")
            if floor == "services" and floor_of.get(dep) == "adapters":
                breaches.append(f"service {name} depends on adapter {dep} (define the port it uses in roncho-core)")
        src = directory / "src"
        if name in SHARED_ADAPTER_LIBRARIES:
            for port in sorted(ports_implemented(src, ports)):
                breaches.append(f"shared library {name} implements the port {port}: make it an adapter of its own")
        for cycle in file_cycles(src):
            breaches.append(f"circle in {name}: {' -> '.join(cycle)}")
        max_file, max_fn = FLOOR_LIMITS.get(floor, (MAX_FILE_LINES, MAX_FN_LINES))
        for path in sorted(src.rglob("*.rs")):
            rel = path.relative_to(ROOT)
            text = path.read_text()
            lines = code_lines(text).count("\n")
            if lines > max_file:
                breaches.append(f"file {rel} ({lines} lines, {max_file} at most)")
            for fn, fn_lines in long_functions(text, max_fn):
                breaches.append(f"fn {rel}::{fn} ({fn_lines} lines, {max_fn} at most)")
    neutral = [name for name, floor in floor_of.items() if floor in WIRE_NEUTRAL_FLOORS] + WIRE_NEUTRAL_CRATES
    for name, linked in sorted(grpc_links(neutral).items()):
        if linked:
            breaches.append(f"wire {name} links {', '.join(linked)}")
    for trait, method in capability_questions(ROOT / "core/roncho-core/src"):
        breaches.append(
            f"capability question roncho-core::{trait}::{method} (takes nothing but self: a port is asked "
            "to do something; if this answers something else, say what in SELF_ONLY_METHODS)"
        )
    trait, methods = largest_trait(ROOT / "core/roncho-core/src")
    if methods > MAX_TRAIT_METHODS:
        breaches.append(f"trait roncho-core::{trait} has {methods} methods")
    new = sorted(set(breaches) - KNOWN)
    gone = sorted(KNOWN - set(breaches))
    for breach in new:
        print(f"layout: {breach}")
    for breach in gone:
        print(f"layout: {breach} is fixed: take it out of KNOWN in scripts/check-layout.py")
    for breach in sorted(KNOWN & set(breaches)):
        print(f"layout (known, issue 34): {breach}")
    print(f"layout: {len(all_crates)} crates, largest core trait {trait} ({methods} methods)")
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
