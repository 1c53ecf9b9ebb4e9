#!/usr/bin/env bash
# The times the file:// watermark of one tenant changes, over 8 s of a writer
# committing 100 times a second (batch_age_ms_max 50, key_write_interval_ms 1000):
#   bash wm_gaps.sh PATH/TO/walship    prints the gaps between changes, ms.
BIN=$1
W=$(mktemp -d); cd $W; mkdir sink
sqlite3 src.db "PRAGMA journal_mode=wal; CREATE TABLE t(id INTEGER PRIMARY KEY, ts INTEGER, v BLOB);" >/dev/null
printf '[shard.0]\nbatch_age_ms_max = 50\nkey_write_interval_ms = 1000\n' >ws.ini
$BIN replicate --quiet --config ws.ini --sink file://$W/sink app=$W/src.db >/dev/null 2>rep.err &
rp=$!
python3 - <<'PY' &
import sqlite3, time
c = sqlite3.connect("src.db", isolation_level=None, timeout=10)
t0=time.time(); n=0
while time.time()-t0 < 8:
    c.execute("INSERT INTO t(ts, v) VALUES (?, randomblob(200))", (int(time.time()*1000),)); n+=1
    time.sleep(max(0, t0+n/100-time.time()))
PY
python3 - <<'PY'
import os, time
last=None; t0=time.time(); out=[]
while time.time()-t0 < 8:
    try: st=os.stat("sink/app/wm"); m=(st.st_ino, st.st_mtime_ns)
    except FileNotFoundError: m=None
    if m!=last and m is not None:
        out.append(time.time()); last=m
    time.sleep(0.001)
g=[int((b-a)*1000) for a,b in zip(out,out[1:])]
print("gaps", g)
PY
kill $rp; wait 2>/dev/null; rm -rf $W
