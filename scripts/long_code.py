"""List functions longer than a limit (default 60 lines) and files longer than a limit (default 400 lines).

    python scripts/long_code.py [--fn 60] [--file 400] [paths ...]   (default path: src)

Exit status 1 when anything is listed, so it can gate a check.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys


def python_files(roots: list[str]) -> list[pathlib.Path]:
    out: list[pathlib.Path] = []
    for root in roots:
        p = pathlib.Path(root)
        out += [p] if p.is_file() else sorted(p.rglob("*.py"))
    return out


def long_functions(files: list[pathlib.Path], limit: int) -> list[tuple[int, str, str]]:
    """(lines, file:line, name) of every function or method over `limit` lines, longest first."""
    rows = []
    for p in files:
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno is not None:
                length = n.end_lineno - n.lineno + 1
                if length > limit:
                    rows.append((length, f"{p}:{n.lineno}", n.name))
    return sorted(rows, reverse=True)


def long_files(files: list[pathlib.Path], limit: int) -> list[tuple[int, str]]:
    rows = [(len(p.read_text(encoding="utf-8").splitlines()), str(p)) for p in files]
    return sorted((r for r in rows if r[0] > limit), reverse=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=["src"])
    ap.add_argument("--fn", type=int, default=60, help="function length limit in lines")
    ap.add_argument("--file", type=int, default=400, help="file length limit in lines")
    args = ap.parse_args()
    files = python_files(args.paths)
    fns, big = long_functions(files, args.fn), long_files(files, args.file)
    for length, where, name in fns:
        print(f"function {length:5d}  {where}  {name}")
    for length, where in big:
        print(f"file     {length:5d}  {where}")
    return 1 if fns or big else 0


if __name__ == "__main__":
    sys.exit(main())
