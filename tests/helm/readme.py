"""Generates the values table of helm/neardup/README.md from helm/neardup/values.yaml.

A value is documented by a `# -- description` comment (continued by further `#` lines) right
above its key, the helm-docs convention. Every leaf value must be documented, itself or
through a documented parent (e.g. `config`, whose keys are neardup's own). The table lives
between the markers `<!-- values:start -->` and `<!-- values:end -->` of the README.

usage: python3 tests/helm/readme.py --write | --check
"""

import json
import re
import sys
from pathlib import Path

import yaml

CHART = Path(__file__).resolve().parents[2] / "helm" / "neardup"
START, END = "<!-- values:start -->", "<!-- values:end -->"
KEY = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):(.*)$")


def documented(lines):
    """[(path, description)] in file order."""
    out, stack, pending = [], [], None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = [stripped[4:].strip()]
            continue
        if stripped.startswith("#") and pending is not None:
            pending.append(stripped[1:].strip())
            continue
        m = KEY.match(line)
        if m and not stripped.startswith("-"):
            indent = len(m.group(1))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, m.group(2)))
            if pending is not None:
                out.append((".".join(k for _, k in stack), " ".join(pending)))
        if stripped and not stripped.startswith("#"):
            pending = None
    return out


def leaves(value, path=""):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else k)
    else:
        yield path


def lookup(values, path):
    for part in path.split("."):
        values = values[part]
    return values


def table():
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    docs = documented(text.splitlines())
    paths = {p for p, _ in docs}
    missing = [
        leaf
        for leaf in leaves(values)
        if not any(leaf == p or leaf.startswith(p + ".") for p in paths)
    ]
    if missing:
        sys.exit("undocumented values (add a `# --` comment above them): " + ", ".join(missing))
    rows = ["| Key | Default | Description |", "|-----|---------|-------------|"]
    for path, desc in docs:
        default = json.dumps(lookup(values, path), separators=(", ", ": "))
        rows.append(f"| `{path}` | `{default}` | {desc.replace('|', '&#124;')} |")
    return "\n".join(rows)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--check"
    readme = CHART / "README.md"
    text = readme.read_text()
    if START not in text or END not in text:
        sys.exit(f"{readme} lacks the markers {START} and {END}")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{table()}\n{END}{tail}"
    if mode == "--write":
        readme.write_text(new)
    elif new != text:
        sys.exit(f"{readme} is out of date with values.yaml: run python3 tests/helm/readme.py --write")


if __name__ == "__main__":
    main()
