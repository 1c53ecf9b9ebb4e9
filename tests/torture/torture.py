#!/usr/bin/env python3
"""History-checking torture harness for walship (run it through run.sh).

Each run: real SQLite writers (writer.py, one process per source database)
record every committed state; the real `walship replicate --json` ships them
to a file:// sink under random pauses at its fault sites (WS_PAUSE_RANDOM),
random batch sizes down to one frame, kill -9 and SIGTERM at random moments
and restarts, and SIGSTOP while the checker looks at the sink. At each stop,
and once more after the writers end and a last `replicate --once`, for each
tenant: `ls` (the watermark's generation), `verify`, the latest `restore`,
and `restore --frame N` at acknowledged last_frames of that generation. Every
restored database must be exactly one recorded state (its (life, seq) and
its content's digest), pass integrity_check, and be the state the
acknowledgement names (--frame), at or after the last acknowledged state
(latest), or the writer's last state (after the final --once); verify must
agree with restore. Any difference is a failure, printed with the seed.
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import digest as dg  # noqa: E402

# Sizes: seconds a run writes, tenants, restores of acknowledged frames per
# tenant and check.
# times_per_tenant: points in time sampled per tenant at the final check
# (restore --time each); rebase_p: how often a stop of walship is followed,
# while it is down, by what makes the next one re-base.
SIZES = {
    "smoke": dict(run_s=(32, 32), tenants=(2, 2), frames_per_check=2, event_s=(2.0, 5.0), times_per_tenant=8,
                  rebase_p=0.6),
    "full": dict(run_s=(45, 120), tenants=(1, 3), frames_per_check=3, event_s=(1.0, 8.0), times_per_tenant=30,
                 rebase_p=0.5),
}


SANITIZER = re.compile(r"ERROR: (Address|Leak|Thread|Memory)Sanitizer|WARNING: ThreadSanitizer|runtime error:")


class Failure(Exception):
    pass


def now():
    return time.monotonic()


class Run:
    def __init__(self, h, seed, scenario, size):
        self.h = h
        self.seed = seed
        self.rng = random.Random(seed)
        self.scenario = scenario
        self.size = SIZES[size]
        self.size_name = size
        self.dir = os.path.join(h.workdir, "run-%d" % seed)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.sink = "file://" + os.path.join(self.dir, "sink")
        self.stopfile = os.path.join(self.dir, "writers.stop")
        self.ws = None
        self.ws_life = 0
        self.ws_logs = []  # (stdout path, stderr path)
        self.obs = []
        self.failures = []
        self.stats = dict(pauses=0, kills=0, terms=0, stops=0, checks=0, tail_errors=0, skipped_frames=0,
                          drain_replaced=0, drain_deadline=0, term_before_start=0, sink_checkpoints=0, outside_signals=0, rebase_requests=0)
        self.events = []

    def log(self, msg):
        line = "[seed %d +%.1fs] %s" % (self.seed, now() - self.t0, msg)
        self.events.append(line)
        if self.h.verbose:
            print(line, flush=True)

    def fail(self, msg):
        self.failures.append(msg)
        self.log("FAIL: " + msg)

    # -- writers ---------------------------------------------------------------
    def start_writers(self):
        if self.scenario == "restart-busy":
            n = 1
        else:
            n = self.rng.randint(*self.size["tenants"])
        self.tenants = []
        for i in range(n):
            name = "t%d" % i
            db = os.path.join(self.dir, name + ".db")
            st = os.path.join(self.dir, name + ".states.jsonl")
            out = open(os.path.join(self.dir, name + ".writer.out"), "w")
            req = os.path.join(self.dir, name + ".request")
            p = subprocess.Popen([sys.executable, "-B", os.path.join(HERE, "writer.py"), "--db", db, "--log", st,
                                  "--seed", str(self.rng.randrange(1 << 30)), "--stop", self.stopfile,
                                  "--request", req,
                                  "--profile", "restart-busy" if self.scenario == "restart-busy" else "mixed"]
                                 + [x for kv in self.h.writer_set for x in ("--set", kv)],
                                 stdout=out, stderr=subprocess.STDOUT)
            self.tenants.append(dict(name=name, db=db, states=st, proc=p, out=out.name, acks=[], request=req))
        deadline = now() + 60
        for t in self.tenants:
            while not (os.path.exists(t["states"]) and os.path.getsize(t["states"]) > 0):
                if t["proc"].poll() is not None or now() > deadline:
                    raise Failure("writer %s did not start: %s" % (t["name"], open(t["out"]).read()[-2000:]))
                time.sleep(0.05)

    def stop_writers(self):
        open(self.stopfile, "w").close()
        for t in self.tenants:
            try:
                rc = t["proc"].wait(timeout=300)
            except subprocess.TimeoutExpired:
                t["proc"].kill()
                rc = -9
            if rc != 0:
                self.fail("writer %s exited %s: %s" % (t["name"], rc, open(t["out"]).read()[-2000:]))
            else:
                t["summary"] = json.loads(open(t["out"]).read().strip().splitlines()[-1])

    # -- walship ---------------------------------------------------------------
    def config(self):
        """A random configuration (None: the default one)."""
        if self.scenario == "restart-busy":
            return None
        r = self.rng
        lines = ["[engine]"]
        if r.random() < 0.3:
            lines.append("wal_checkpoint_bytes = %s" % r.choice(("off", "64KiB", "1MiB", "16MiB")))
        bb = r.choice((None, 65656, 262144, 1 << 20))
        if bb:
            lines.append("batch_bytes_max = %d" % bb)
            lines.append("ring_bytes = %d" % (bb * r.choice((2, 3, 8))))
        bf = r.choice((None, 1, 1, 2, 3, 7, 64, 1000))
        if bf and bf < self.h.min_batch_frames:
            bf = self.h.min_batch_frames
        if bf:
            lines.append("batch_frames_max = %d" % bf)
        ba = r.choice((None, 0, 5, 50, 300))
        if ba is not None:
            lines.append("batch_age_ms_max = %d" % ba)
        if r.random() < 0.5:
            lines.append("uploads_in_flight = %d" % r.choice((1, 2, 8)))
        path = os.path.join(self.dir, "ws-%d.ini" % self.ws_life)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def start_ws(self, once=False):
        self.ws_life += 1
        out = os.path.join(self.dir, "ws-%d.out" % self.ws_life)
        err = os.path.join(self.dir, "ws-%d.err" % self.ws_life)
        cmd = [self.h.ws_bin, "replicate", "--sink", self.sink, "--json"]
        cfg = self.config()
        if cfg:
            cmd += ["--config", cfg]
        if once:
            cmd.append("--once")
        elif self.scenario != "restart-busy" and self.rng.random() < 0.3:
            # Sink checkpoints: a plain restore then starts from the latest
            # checkpoint's artifact when the chain passes through its cut.
            cmd += ["--checkpoint-interval-s", str(self.rng.randint(2, 10))]
        cmd += ["%s=%s" % (t["name"], t["db"]) for t in self.tenants]
        env = dict(os.environ)
        env.pop("WS_PAUSE_RANDOM", None)
        if self.scenario != "restart-busy" and self.rng.random() < 0.85:
            env["WS_PAUSE_RANDOM"] = "%d:%d:%d" % (self.rng.randrange(1 << 30), self.rng.choice((5, 20, 100, 300)),
                                                   self.rng.choice((2, 20, 100)))
            env["WS_PAUSE_LOG"] = "1"
        self.ws_logs.append((out, err))
        self.log("walship %d: %s%s" % (self.ws_life, " ".join(cmd[1:4] + cmd[5:]),
                                        " WS_PAUSE_RANDOM=" + env["WS_PAUSE_RANDOM"] if "WS_PAUSE_RANDOM" in env else ""))
        if cfg:
            self.log("  config: " + open(cfg).read().replace("\n", "; "))
        self.ws = subprocess.Popen(cmd, stdout=open(out, "w"), stderr=open(err, "w"), env=env)
        self.ws_started = now()
        return self.ws

    def read_acks(self):
        """Every outcome printed so far, per tenant, in order."""
        for t in self.tenants:
            t["acks"] = []
        byname = {t["name"]: t for t in self.tenants}
        for life, (out, _) in enumerate(self.ws_logs, 1):
            if not os.path.exists(out):
                continue
            for line in open(out).read().splitlines():
                if not line.endswith("}"):
                    continue  # cut short by kill -9
                o = json.loads(line)
                if "tenant" not in o:
                    continue
                o["ws_life"] = life
                byname[o["tenant"]]["acks"].append(o)

    def stop_ws(self, how):
        p = self.ws
        self.ws = None
        if p is None:
            return
        if how == "kill":
            p.send_signal(signal.SIGKILL)
            p.wait()
            self.stats["kills"] += 1
            self.log("walship %d: kill -9 after %.1fs" % (self.ws_life, now() - self.ws_started))
            return
        p.send_signal(signal.SIGTERM)
        self.stats["terms"] += 1
        try:
            rc = p.wait(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            self.fail("walship %d did not stop within 300 s of SIGTERM" % self.ws_life)
            return
        self.log("walship %d: SIGTERM after %.1fs: exit %d" % (self.ws_life, now() - self.ws_started, rc))
        errs = [l for l in open(self.ws_logs[-1][1], errors="replace").read().splitlines()
                if l.startswith("walship: error: ")]
        if rc == 1 and errs and all("was replaced at its path during the call" in l for l in errs):
            # The drain's last tail lost a race with the application
            # replacing the file: nothing acknowledged, the next start
            # re-bases. Counted, not a failure.
            self.stats["drain_replaced"] += 1
        elif rc == 1 and "reached; stopping now" in open(self.ws_logs[-1][1], errors="replace").read():
            # The drain ran past drain_ms_max (random pauses of up to
            # 100 ms at thousands of sites make a drain minutes long on a
            # loaded machine): walship exits 1 at the deadline by design,
            # naming what it left; the next start ships it and every
            # acknowledged state is still checked. Counted, not a failure.
            self.stats["drain_deadline"] += 1
        elif (rc == -signal.SIGTERM and now() - self.ws_started < 1.0 and
              os.path.getsize(self.ws_logs[-1][0]) == 0 and os.path.getsize(self.ws_logs[-1][1]) == 0):
            # The SIGTERM came before walship's main() ran (the loader, the
            # sanitizer's start-up): the default action, nothing written,
            # nothing acknowledged. From main() on a stop is held until the
            # drain reads it. Counted, not a failure.
            self.stats["term_before_start"] += 1
        elif rc != 0:
            self.fail("walship %d exited %d after SIGTERM: %s" % (self.ws_life, rc, self.tail(self.ws_logs[-1][1])))

    @staticmethod
    def tail(path, n=1500):
        s = open(path, errors="replace").read()
        s = "\n".join(l for l in s.splitlines() if "fault: paused" not in l)
        return s[-n:]

    def ws_cmd(self, *args, timeout=600):
        for _ in range(3):
            p = subprocess.run([self.h.ws_bin] + list(args), capture_output=True, text=True, timeout=timeout)
            # The harness never signals these commands: SIGTERM, SIGKILL,
            # SIGINT or SIGHUP came from outside (a shared machine), so the
            # command runs again; a crash signal (SEGV, ABRT, BUS) does not.
            if p.returncode not in (-signal.SIGTERM, -signal.SIGKILL, -signal.SIGINT, -signal.SIGHUP):
                break
            self.stats["outside_signals"] += 1
            self.log("walship %s killed by signal %d from outside the harness; again" % (args[0], -p.returncode))
        self.sanitizer_check(p.stderr, "walship " + " ".join(args[:1]))
        return p.returncode, p.stdout, p.stderr

    def sanitizer_check(self, text, what):
        m = SANITIZER.search(text)
        if m:
            i = m.start()
            self.fail("sanitizer report from %s:\n%s" % (what, text[i:i + 3000]))

    # -- checks ----------------------------------------------------------------
    def restore(self, t, frame=None, at=None):
        out = os.path.join(self.dir, "restored.db")
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.unlink(out + suffix)
            except FileNotFoundError:
                pass
        args = ["restore", "--sink", self.sink, "--tenant", t["name"], "--force", "-o", out]
        if frame is not None:
            args += ["--frame", str(frame)]
        if at is not None:
            args += ["--time", at]
        rc, _, err = self.ws_cmd(*args)
        res = dict(rc=rc, err=err.strip()[:800])
        if rc != 0:
            return res
        c = sqlite3.connect(out)
        try:
            res["integrity"] = c.execute("PRAGMA integrity_check").fetchall()
            try:
                life, seq, rowsum, schema = dg.scan(c)
                res.update(life=life, seq=seq, digest=dg.digest(life, seq, rowsum, schema))
            except sqlite3.Error as e:
                res["scan_error"] = str(e)
        except sqlite3.Error as e:
            res["integrity"] = [[str(e)]]
        finally:
            c.close()
        return res

    def check(self, why, final=False):
        """Look at the sink while no walship changes it."""
        self.stats["checks"] += 1
        self.read_acks()
        for t in self.tenants:
            acks = [a for a in t["acks"] if a["outcome"] in ("streamed", "restarted")]
            rc, out, err = self.ws_cmd("ls", "--sink", self.sink, "--tenant", t["name"], "--json")
            if rc != 0:
                if acks:
                    self.fail("%s: ls failed after %d acknowledged outcomes: %s" % (t["name"], len(acks), err))
                continue
            wm = json.loads(out.strip().splitlines()[-1]).get("watermark")
            if wm is None:
                # Objects but no watermark yet: nothing was acknowledged.
                if acks:
                    self.fail("%s: ls shows no watermark after %d acknowledged outcomes: %s" % (
                        t["name"], len(acks), out.strip()[-300:]))
                continue
            vrc, vout, verr = self.ws_cmd("verify", "--sink", self.sink, "--tenant", t["name"])
            base = dict(tenant=t["name"], why=why, verify_rc=vrc, verify_err=(vout + verr).strip()[-600:],
                        wm=wm, acks_before=[(a["ws_life"], gen_of(a), a["last_frame"]) for a in acks[-1:]],
                        all_acks=len(acks), final=final)
            o = dict(base, kind="latest", **self.restore(t))
            self.obs.append(o)
            # Acknowledged last_frames of the watermark's generation.
            g = wm["generation"]
            cand = sorted({a["last_frame"] for a in acks
                           if gen_of(a) == (g["checkpoint_seq"], tuple(g["salt"]) if g["salt"] else None)
                           and 0 < a["last_frame"] <= wm["last_frame"]})
            pick = set(cand[-1:])
            k = self.size["frames_per_check"]
            if len(cand) > 1:
                pick |= set(self.rng.sample(cand[:-1], min(k - 1, len(cand) - 1)))
            for f in sorted(pick):
                o = dict(base, kind="frame", frame=f, salt=g["salt"], **self.restore(t, f))
                self.obs.append(o)
            if final:
                self.check_times(t, base, acks)
        self.log("check (%s): %d observations so far" % (why, len(self.obs)))

    def check_times(self, t, base, acks):
        """restore --time at points sampled over the whole run, and at the
        oldest stored state's time; ls TENANT must list a generation for
        every restart acknowledged (nothing here runs retention: all is
        kept)."""
        rc, out, err = self.ws_cmd("ls", "--sink", self.sink, t["name"], "--json")
        if rc != 0:
            self.fail("%s: ls TENANT failed: %s" % (t["name"], err.strip()[-600:]))
            return
        gens = [json.loads(l) for l in out.strip().splitlines() if l.strip()]
        chains = 1 + max(g["chain"] for g in gens)
        # Each "restarted" outcome began a generation (a re-base, or the
        # next WAL's) after the first: every one must still be listed.
        restarts = sum(1 for a in acks if a["outcome"] == "restarted")
        self.h.totals["chains listed"] += chains
        if len(gens) < restarts + 1:
            self.fail("%s: ls lists %d generations in %d chains, but %d restarts were acknowledged after the first: "
                      "history behind a re-base is unreachable" % (t["name"], len(gens), chains, restarts))
        oldest_ms = min(g["first_time_ms"] for g in gens)
        states = [json.loads(l) for l in open(t["states"]).read().splitlines() if l.strip()]
        lo, hi = states[0]["t"], time.time()
        points = {int(self.rng.uniform(lo, hi) * 1000) for _ in range(self.size["times_per_tenant"])}
        points.add(oldest_ms)
        for ms in sorted(points):
            at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)
            o = dict(base, kind="time", t_ms=ms, at=at, oldest_ms=oldest_ms, **self.restore(t, at=at))
            self.obs.append(o)

    # -- evaluation ----------------------------------------------------------
    def evaluate(self):
        hist = {}
        for t in self.tenants:
            states = [json.loads(l) for l in open(t["states"]).read().splitlines() if l.strip()]
            by_id, by_pos = {}, {}
            for i, s in enumerate(states):
                by_id[(s["life"], s["seq"])] = (i, s)
                if s["salt"] is not None and s["frame"] is not None:
                    by_pos[(tuple(s["salt"]), s["frame"])] = i
            hist[t["name"]] = (states, by_id, by_pos)
            self.h.totals["states recorded"] += len(states)
            self.read_acks()
            self.h.totals["acknowledged outcomes"] += sum(
                1 for a in t["acks"] if a["outcome"] in ("streamed", "restarted"))
        checked_states = set()
        acks_checked = set()
        times_seen = {}
        for o in self.obs:
            states, by_id, by_pos = hist[o["tenant"]]
            what = "%s %s%s (%s, walship %s)" % (o["tenant"], o["kind"],
                                                  " --frame %d" % o["frame"] if o["kind"] == "frame" else "",
                                                  o["why"], o["acks_before"][0][0] if o["acks_before"] else "-")
            if o["kind"] == "time":
                what = "%s restore --time %s (%s)" % (o["tenant"], o["at"], o["why"])
                self.h.totals["points in time checked"] += 1
            verify_ok = o["verify_rc"] == 0
            if o["rc"] != 0 and o["kind"] == "time":
                # Only a point before the oldest stored state may be refused.
                if o["t_ms"] < o["oldest_ms"] and "nothing was shipped at or before" in o["err"]:
                    self.h.totals["points before the first shipment"] += 1
                else:
                    self.h.totals["points in time refused"] += 1
                    self.fail("%s: refused a stored point (the oldest stored state is from %d ms): %s" % (
                        what, o["oldest_ms"], o["err"]))
                continue
            if o["rc"] != 0:
                if o["kind"] == "frame" and "before the first restorable frame" in o["err"]:
                    self.stats["skipped_frames"] += 1
                    continue
                self.fail("%s: restore refused an acknowledged state (exit %d): %s%s" % (
                    what, o["rc"], o["err"], "; verify passed" if verify_ok else ""))
                continue
            bad = []
            if o["integrity"] != [("ok",)] and o["integrity"] != [["ok"]]:
                bad.append("integrity_check: %s" % o["integrity"][:5])
            if "scan_error" in o:
                bad.append("unreadable: " + o["scan_error"])
            else:
                hit = by_id.get((o["life"], o["seq"]))
                if hit is None:
                    bad.append("state (life %d, seq %d) was never recorded" % (o["life"], o["seq"]))
                elif hit[1]["digest"] != o["digest"]:
                    bad.append("content differs from recorded state (life %d, seq %d): a state that never existed"
                               % (o["life"], o["seq"]))
                else:
                    idx = hit[0]
                    checked_states.add((o["tenant"], o["life"], o["seq"]))
                    if o["kind"] == "time":
                        # Not newer than the point: the state after the one
                        # restored began only once this one was recorded.
                        if idx > 0 and states[idx - 1]["t"] > o["t_ms"] / 1000.0 + 0.002:
                            bad.append("state #%d (life %d, seq %d) was committed after the point: its "
                                       "predecessor was recorded at %.3f" % (idx, o["life"], o["seq"],
                                                                              states[idx - 1]["t"]))
                        prev = times_seen.get(o["tenant"])
                        if prev is not None and prev[0] <= o["t_ms"] and prev[1] > idx:
                            bad.append("not monotone: state #%d at %d ms, state #%d at %d ms" % (
                                prev[1], prev[0], idx, o["t_ms"]))
                        times_seen[o["tenant"]] = (o["t_ms"], idx)
                    elif o["kind"] == "frame":
                        want = by_pos.get((tuple(o["salt"]), o["frame"]))
                        if want is None:
                            self.h.totals["acks without a recorded frame"] += 1
                        elif want != idx:
                            bad.append("restored state #%d (life %d, seq %d) but frame %d of generation %s is state "
                                       "#%d (life %d, seq %d)" % (idx, o["life"], o["seq"], o["frame"], o["salt"],
                                                                  want, states[want]["life"], states[want]["seq"]))
                        else:
                            acks_checked.add((o["tenant"], tuple(o["salt"]), o["frame"]))
                    else:
                        for (_, gen, lf) in o["acks_before"]:
                            want = by_pos.get((gen[1], lf)) if gen[1] else None
                            if want is not None and idx < want:
                                bad.append("latest restore is state #%d (life %d, seq %d), before the last "
                                           "acknowledged state #%d (life %d, seq %d)" % (
                                               idx, o["life"], o["seq"], want, states[want]["life"],
                                               states[want]["seq"]))
                            elif want is not None:
                                acks_checked.add((o["tenant"], gen[1], lf))
                        if o["final"] and idx != len(states) - 1:
                            bad.append("after the writers ended and replicate --once, the latest restore is state "
                                       "#%d (life %d, seq %d), not the last one #%d (life %d, seq %d)" % (
                                           idx, o["life"], o["seq"], len(states) - 1, states[-1]["life"],
                                           states[-1]["seq"]))
            if bad:
                self.fail("%s: %s%s" % (what, "; ".join(bad),
                                        "; verify passed it" if verify_ok else "; verify: " + o["verify_err"]))
            elif not verify_ok:
                self.fail("%s: verify fails (exit %d: %s) a chain that restores correctly" % (
                    what, o["verify_rc"], o["verify_err"]))
        self.h.totals["states checked"] += len(checked_states)
        self.h.totals["acknowledged outcomes checked"] += len(acks_checked)
        self.h.totals["restores"] += len(self.obs)

    # -- the run -------------------------------------------------------------
    def go(self):
        self.t0 = now()
        try:
            self.start_writers()
            if self.scenario == "restart-busy":
                self.busy_restart()
            else:
                self.mixed()
            self.stop_writers()
            if self.ws is not None:
                self.stop_ws(self.rng.choice(("kill", "term")))
                self.check("walship stopped")
            # Ship what was committed, then the latest must be the last state.
            p = self.start_ws(once=True)
            try:
                rc = p.wait(timeout=600)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = -9
            self.ws = None
            if rc != 0:
                self.fail("final replicate --once exited %d: %s" % (rc, self.tail(self.ws_logs[-1][1])))
            self.check("final", final=True)
            self.evaluate()
        except Failure as e:
            self.fail(str(e))
        except Exception:
            import traceback
            self.fail("harness error (not a walship failure):\n" + traceback.format_exc())
        finally:
            if self.ws is not None:
                self.ws.kill()
                self.ws.wait()
            open(self.stopfile, "w").close()
            for t in getattr(self, "tenants", []):
                if t["proc"].poll() is None:
                    t["proc"].kill()
                    t["proc"].wait()
        for life, (out, err) in enumerate(self.ws_logs, 1):
            if os.path.exists(out):
                self.stats["sink_checkpoints"] += open(out, errors="replace").read().count('"committed":true')
            if os.path.exists(err):
                text = open(err, errors="replace").read()
                self.sanitizer_check(text, "walship replicate %d" % life)
                self.stats["pauses"] += text.count("walship: fault: paused at")
                for l in text.splitlines():
                    if l.startswith("walship: error: tenant "):
                        self.stats["tail_errors"] += 1
                        # Named by its message without tenant, paths and numbers.
                        k = re.sub(r"\d+", "N", re.sub(r"/\S+", "PATH", l.split(": ", 3)[-1]))[:160]
                        self.h.errors[k] = self.h.errors.get(k, 0) + 1
        return not self.failures

    def rebase_while_down(self):
        """walship is down: ask each writer (some of them) for a cause of a
        re-base and wait until it is done, so the next walship re-bases."""
        if self.scenario == "restart-busy" or self.rng.random() >= self.size["rebase_p"]:
            return
        waiting = []
        for t in self.tenants:
            if t["proc"].poll() is not None or self.rng.random() < 0.3:
                continue
            what = self.rng.choice(("lastclose", "truncate", "replace"))
            with open(t["request"] + ".tmp", "w") as f:
                f.write(what + "\n")
            os.rename(t["request"] + ".tmp", t["request"])
            waiting.append(t)
            self.stats["rebase_requests"] += 1
            self.log("%s: asked the writer for a re-base's cause while walship is down: %s" % (t["name"], what))
        deadline = now() + 60
        for t in waiting:
            while os.path.exists(t["request"]):
                if t["proc"].poll() is not None or now() > deadline:
                    raise Failure("writer %s did not serve its request: %s" % (t["name"], open(t["out"]).read()[-2000:]))
                time.sleep(0.02)

    def mixed(self):
        lo, hi = self.size["run_s"]
        end = self.t0 + self.rng.uniform(lo, hi)
        self.start_ws()
        while now() < end:
            time.sleep(self.rng.uniform(*self.size["event_s"]))
            r = self.rng.random()
            if self.ws is None:
                self.start_ws()
            elif r < 0.3:
                self.stop_ws("kill")
                if self.rng.random() < 0.5:
                    self.check("after kill -9")
                time.sleep(self.rng.uniform(0, 2))
                self.rebase_while_down()
                self.start_ws()
            elif r < 0.45:
                self.stop_ws("term")
                if self.rng.random() < 0.5:
                    self.check("after SIGTERM")
                time.sleep(self.rng.uniform(0, 2))
                self.rebase_while_down()
                self.start_ws()
            elif r < 0.75:
                self.ws.send_signal(signal.SIGSTOP)
                self.stats["stops"] += 1
                try:
                    self.check("walship stopped by SIGSTOP")
                finally:
                    self.ws.send_signal(signal.SIGCONT)

    def busy_restart(self):
        """Issue 10's case: the default configuration stopped ~T s in and
        started again while the writer goes on."""
        T = self.h.restart_after
        self.start_ws()
        time.sleep(T * self.rng.uniform(0.8, 1.2))
        self.stop_ws(self.rng.choice(("kill", "term")))
        time.sleep(self.rng.uniform(0, 1))
        self.start_ws()
        end = now() + T
        while now() < end:
            time.sleep(min(max(0.1, end - now()), self.rng.uniform(2, 5)))
            if now() < end:
                self.ws.send_signal(signal.SIGSTOP)
                self.stats["stops"] += 1
                try:
                    self.check("after the restart, walship stopped by SIGSTOP")
                finally:
                    self.ws.send_signal(signal.SIGCONT)


def gen_of(a):
    """(checkpoint_seq, (salt1, salt2) or None) of an outcome's generation."""
    g = a.get("new_generation") if a["outcome"] == "restarted" else None
    if g is not None and g.get("salt"):
        return (g["checkpoint_seq"], tuple(g["salt"]))
    # The generation key: <tenant>/e<epoch>-p<pg>/g<seq>-<salt1><salt2>/...
    m = re.search(r"/g([0-9a-f]{8})-([0-9a-f]{8})([0-9a-f]{8})/", a.get("generation_key", ""))
    if m:
        return (int(m.group(1), 16), (int(m.group(2), 16), int(m.group(3), 16)))
    return (a.get("checkpoint_seq"), None)


class Harness:
    def __init__(self, a):
        self.ws_bin = a.ws_bin
        self.workdir = a.workdir
        self.verbose = a.verbose
        self.restart_after = a.restart_after
        self.min_batch_frames = a.min_batch_frames
        self.writer_set = a.writer
        self.errors = {}
        self.totals = {k: 0 for k in ("states recorded", "states checked", "acknowledged outcomes",
                                      "acknowledged outcomes checked", "acks without a recorded frame",
                                      "restores", "points in time checked", "points in time refused",
                                      "points before the first shipment", "chains listed")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--run-seed", type=int, default=None, help="one run with this run seed (as a failure prints)")
    ap.add_argument("--minutes", type=float, default=0)
    ap.add_argument("--runs", type=int, default=0)
    ap.add_argument("--scenario", default="mixed", choices=("mixed", "restart-busy"))
    ap.add_argument("--size", default="full", choices=sorted(SIZES))
    ap.add_argument("--restart-after", type=float, default=25.0,
                    help="restart-busy: seconds before walship is stopped, and after its restart")
    ap.add_argument("--min-batch-frames", type=int, default=1,
                    help="smallest batch_frames_max drawn (default 1)")
    ap.add_argument("--writer", action="append", default=[], metavar="KEY=VALUE",
                    help="a writer probability (p_big=0.3, p_replace=0.02, ...; see writer.py PROFILES)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--ws-bin", default=os.environ.get("WS_BIN"))
    ap.add_argument("--keep", action="store_true", help="keep every run's directory (failed runs are kept anyway)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if not a.ws_bin:
        ap.error("--ws-bin or WS_BIN must name the walship binary")
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "little")
    if (not a.minutes and not a.runs) or a.run_seed is not None:
        a.runs = 1
    if a.workdir is None:
        a.workdir = os.path.join(os.environ.get("WS_TEST_TMP", "/tmp"), "torture.%d" % os.getpid())
    os.makedirs(a.workdir, exist_ok=True)
    h = Harness(a)
    print("torture: seed %d, scenario %s, size %s, %s, in %s" % (
        a.seed, a.scenario, a.size, ("%d runs" % a.runs) if a.runs else ("%g minutes" % a.minutes), a.workdir),
        flush=True)
    start = now()
    runs = 0
    failed = []
    stats = {}
    while (a.runs and runs < a.runs) or (not a.runs and now() - start < a.minutes * 60):
        rs = int.from_bytes(hashlib.sha256(b"%d:%d" % (a.seed, runs)).digest()[:4], "little")
        if a.run_seed is not None:
            rs = a.run_seed
        r = Run(h, rs, a.scenario, a.size)
        ok = r.go()
        runs += 1
        for k, v in r.stats.items():
            stats[k] = stats.get(k, 0) + v
        print("run %d (seed %d, %d tenants, %d walship starts): %s  %s" % (
            runs, rs, len(getattr(r, "tenants", [])), r.ws_life, "ok" if ok else "FAILED",
            " ".join("%s=%d" % kv for kv in sorted(r.stats.items()))), flush=True)
        if not ok:
            failed.append(rs)
            for f in r.failures:
                print("  FAILURE: " + f)
            print("  events:")
            for e in r.events[-40:]:
                print("    " + e)
            print("  kept: %s (rerun: run.sh --scenario %s --size %s --run-seed %d)" % (r.dir, a.scenario, a.size, rs),
                  flush=True)
        elif not a.keep:
            shutil.rmtree(r.dir, ignore_errors=True)
    print("\ntorture summary: seed %d, scenario %s, size %s, %.1f minutes" % (a.seed, a.scenario, a.size,
                                                                             (now() - start) / 60))
    print("  runs: %d" % runs)
    for k in ("states recorded", "states checked", "acknowledged outcomes", "acknowledged outcomes checked",
              "acks without a recorded frame", "restores"):
        print("  %s: %d" % (k, h.totals[k]))
    print("  points in time checked (restore --time, every chain): %d, refused: %d (stored points; the goal is 0), "
          "before the first shipment: %d; chains listed by ls TENANT: %d; re-bases asked for while walship was "
          "down: %d" % (h.totals["points in time checked"], h.totals["points in time refused"],
                        h.totals["points before the first shipment"], h.totals["chains listed"],
                        stats.get("rebase_requests", 0)))
    print("  frame restores refused as before the generation's first restorable frame: %d" %
          stats.get("skipped_frames", 0))
    print("  pauses: %d" % stats.get("pauses", 0))
    print("  kills: %d (kill -9), SIGTERM stops: %d, SIGSTOP checks: %d" % (
        stats.get("kills", 0), stats.get("terms", 0), stats.get("stops", 0)))
    print("  sink checkpoints committed (replicate --checkpoint-interval-s): %d" % stats.get("sink_checkpoints", 0))
    print("  tail errors reported by replicate: %d" % stats.get("tail_errors", 0))
    for k, v in sorted(h.errors.items(), key=lambda kv: -kv[1])[:10]:
        print("    %5d x %s" % (v, k))
    print("  SIGTERM drains that lost a race with a database replacement (exit 1, nothing acknowledged): %d"
          % stats.get("drain_replaced", 0))
    print("  SIGTERM drains past drain_ms_max (exit 1 by design, what was left shipped by the next start): %d"
          % stats.get("drain_deadline", 0))
    print("  SIGTERMs that came before walship's main() ran (killed by the default action, nothing written): %d"
          % stats.get("term_before_start", 0))
    print("  check commands killed by a signal from outside the harness (run again): %d"
          % stats.get("outside_signals", 0))
    print("  failures: %d%s" % (len(failed), (" (run seeds: %s)" % " ".join(map(str, failed))) if failed else ""))
    if not failed and not a.keep:
        shutil.rmtree(a.workdir, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
