#!/usr/bin/env python3
"""Digest of a SQLite database's logical content, for the format fixtures.

    python3 fixture_digest.py DB     prints the sha256 (hex) of DB's content

The recorded digests in tests/data/format_v*/expected.txt were taken with
this function from the source database as it committed each state, so it
must never change: a new canonical form needs a new fixture.

Canonical form, hashed with SHA-256: for every row of sqlite_schema
ordered by (type, name), the line `schema TYPE NAME TBL_NAME SQL`, then for
every table (type 'table', not sqlite_*) ordered by name, `table NAME`
and one line per row (ORDER BY rowid) of its values, each encoded as JSON
([type, value]; a blob as lower-case hex), lines joined by '\\n'.
"""
import hashlib
import json
import sqlite3
import sys


def _value(v):
    if v is None:
        return ["null", None]
    if isinstance(v, bytes):
        return ["blob", v.hex()]
    if isinstance(v, float):
        return ["real", repr(v)]
    if isinstance(v, int):
        return ["int", v]
    return ["text", v]


def digest(conn):
    """SHA-256 (hex) of the content `conn` sees (call inside one read)."""
    h = hashlib.sha256()
    schema = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name").fetchall()
    tables = []
    for typ, name, tbl, sql in schema:
        h.update(json.dumps(["schema", typ, name, tbl, sql]).encode() + b"\n")
        if typ == "table" and not name.startswith("sqlite_"):
            tables.append(name)
    for name in sorted(tables):
        h.update(json.dumps(["table", name]).encode() + b"\n")
        quoted = '"' + name.replace('"', '""') + '"'
        for row in conn.execute(f"SELECT * FROM {quoted} ORDER BY rowid"):
            h.update(json.dumps([_value(v) for v in row]).encode() + b"\n")
    return h.hexdigest()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: fixture_digest.py DB")
    conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    try:
        print(digest(conn))
    finally:
        conn.close()


if __name__ == "__main__":
    main()
