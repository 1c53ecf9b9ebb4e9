#!/usr/bin/env python3
"""The writer of bench/run_seal_bench.sh: the same transactions every run.

    seal_writer.py prepare WORKLOAD DB      the starting database (checkpointed, WAL mode)
    seal_writer.py write WORKLOAD DB N [R]  N small commits on it (WAL checkpoints off),
                                            at most R a second when R is given
    seal_writer.py write-many WORKLOAD N R LOG DONE NAME=DB...
                                            N commits on each DB, R a second each (0: as
                                            fast as it can), interleaved; LOG gets a line
                                            `NAME time wal_size` per commit (the WAL's
                                            size once it committed), then DONE (written
                                            last, by rename) each DB's last such line

WORKLOAD text: a table of text rows (author, title, body: words drawn with
a skewed frequency from a fixed vocabulary, so it compresses like prose,
not like random bytes) with an index on (author, title); each commit
inserts 8 rows, every 10th also rewrites one older row's body.
WORKLOAD peer: 2,000 counter rows; each commit updates 4 of the first 200,
so the commits rewrite mostly the same few pages.
Seeded: two runs of `write` with the same N produce the same frames.
"""
import os
import random
import sqlite3
import sys
import time

SYL = ["ka", "to", "ri", "an", "mel", "sor", "dit", "ve", "nu", "pra", "lo", "gen", "sta", "qui", "ber", "on"]


def vocabulary(rng):
    return ["".join(rng.choice(SYL) for _ in range(rng.randint(1, 4))) for _ in range(3000)]


def words(rng, vocab, n):
    # Zipf-like: low indices far more often, as in prose.
    return " ".join(vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)] for _ in range(n))


def connect(path):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    return db


def text_row(rng, vocab):
    return ("author-%d" % rng.randint(1, 60), words(rng, vocab, rng.randint(3, 8)),
            words(rng, vocab, rng.randint(40, 140)))


def prepare(kind, path):
    rng = random.Random(1)
    db = connect(path)
    if kind == "text":
        vocab = vocabulary(rng)
        db.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, author TEXT, title TEXT, body TEXT)")
        db.execute("CREATE INDEX notes_author ON notes(author, title)")
        db.execute("BEGIN")
        for _ in range(500):
            db.execute("INSERT INTO notes(author, title, body) VALUES (?, ?, ?)", text_row(rng, vocab))
        db.execute("COMMIT")
    else:
        db.execute("CREATE TABLE counters(id INTEGER PRIMARY KEY, name TEXT, value INTEGER, updated TEXT)")
        db.execute("BEGIN")
        for i in range(2000):
            db.execute("INSERT INTO counters VALUES (?, ?, 0, '')", (i + 1, "counter-%05d" % (i + 1)))
        db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def commit(kind, db, rng, vocab, i):
    db.execute("BEGIN")
    if kind == "text":
        for _ in range(8):
            db.execute("INSERT INTO notes(author, title, body) VALUES (?, ?, ?)", text_row(rng, vocab))
        if i % 10 == 9:
            db.execute("UPDATE notes SET body = ? WHERE id = ?", (words(rng, vocab, 60), rng.randint(1, 500 + 8 * i)))
    else:
        for _ in range(4):
            db.execute("UPDATE counters SET value = value + ?, updated = ? WHERE id = ?",
                       (rng.randint(1, 9), "t%08d" % i, rng.randint(1, 200)))
    db.execute("COMMIT")


def write(kind, path, n, rate):
    rng = random.Random(2)
    start = time.monotonic()
    vocab = vocabulary(random.Random(1))
    db = connect(path)
    for i in range(n):
        commit(kind, db, rng, vocab, i)
        if rate:
            time.sleep(max(0.0, start + (i + 1) / rate - time.monotonic()))
    # No sqlite3_close: the last connection's close would checkpoint the WAL
    # into the database and delete it (Python 3.11 cannot set
    # SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE); every commit is in the WAL already.
    sys.stdout.flush()
    os._exit(0)


def write_many(kind, n, rate, log, done, targets):
    rng = random.Random(2)
    vocab = vocabulary(random.Random(1))
    dbs = []
    for t in targets:
        name, path = t.split("=", 1)
        dbs.append((name, path + "-wal", connect(path)))
    lines, last = [], {}
    start = time.monotonic()
    for i in range(n):
        for k, (name, wal, db) in enumerate(dbs):
            if rate:
                time.sleep(max(0.0, start + (i + k / len(dbs)) / rate - time.monotonic()))
            commit(kind, db, rng, vocab, i)
            last[name] = "%s %.6f %d\n" % (name, time.time(), os.stat(wal).st_size)
            lines.append(last[name])
    with open(log, "w") as f:
        f.writelines(lines)
    with open(done + ".tmp", "w") as f:
        f.writelines(last[name] for name, _, _ in dbs)
    os.rename(done + ".tmp", done)
    sys.stdout.flush()
    os._exit(0)  # no close: as write() above


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "prepare" and sys.argv[2] in ("text", "peer"):
        prepare(sys.argv[2], sys.argv[3])
    elif len(sys.argv) in (5, 6) and sys.argv[1] == "write" and sys.argv[2] in ("text", "peer") and \
            all(a.isdigit() for a in sys.argv[4:]):
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) == 6 else 0)
    elif len(sys.argv) >= 8 and sys.argv[1] == "write-many" and sys.argv[2] in ("text", "peer") and \
            sys.argv[3].isdigit() and sys.argv[4].isdigit() and all("=" in a for a in sys.argv[7:]):
        write_many(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7:])
    else:
        sys.exit("usage: seal_writer.py prepare text|peer DB | write text|peer DB N [RATE] | "
                 "write-many text|peer N RATE LOG DONE NAME=DB...")


if __name__ == "__main__":
    main()
