"""A soak under faults: one supervisor (real runc sandboxes, the real
agent, real HTTP) on a state folder of its own size, SOAK_CLIENTS client
threads (default 6) doing what users do (soak_load.py: creates, execs,
streamed uploads and downloads with checksums, background processes, the
port proxy, snapshots and restores, MCP calls to server-everything, slow
readers, resets mid-stream) for SOAK_SECONDS (default 120; make test's
it_soak_short runs 45, make soak 600 on the release build), while a
fault thread injects at random (soak_faults.py):
  - the supervisor SIGKILLed and started again on the same state folder;
  - a sandbox's agent SIGKILLed from the host;
  - the OCI runtime failing 40% of its container-making calls for a while
    (a wrapper around runc as --runtime);
  - the state folder's file system full for a few seconds (a file that
    fills its tmpfs, then removed);
one of each kind in turn (their order and gaps from the seed), none in the
last quarter once each kind came (so that the last incarnation's memory
and descriptors are judged after a stretch of load). Then it checks (soak_clients.py,
soak_checks.py): every request answered within its deadline or refused
with the error shape, no connection dropped but by a kill, every
acknowledged write there with its checksum unless the soak failed its
sandbox (which must then show failed or be gone), every sandbox back after
each restart, every killed agent's sandbox reported failed, every
snapshot listed and every listed one restoring, /metrics agreeing with
the clients, nothing left on the machine after the final stop, the
supervisor's descriptors back at its first start's and its memory near
its last start's. Figures (requests, faults by kind, errors by kind, the
worst latency, what leaked) are printed, and written as bench rows when
run by bench/bench_run.py (make soak).

What a full state folder costs: a sandbox's disk is an ext4 image, a
sparse file in the state folder (sup_disk.h), so the folder's file system
holds the data the sandboxes write only once the kernel writes it back.
While that file system is full, writeback fails ("I/O error ... potential
data loss" in the kernel's log), and a file the supervisor answered 200
for (its bytes in the sandbox's page cache) is lost, with no report: the
sandbox runs on, the request was answered. That is no promise API.md
makes, and the product cannot keep it today; so the fault syncs first
(what was answered before the folder filled is written back), and a write
answered while it is full is counted when lost (the figure "writes
answered while the state folder was full, then lost"), not judged. Every
other acknowledged write is.

SOAK_SEED replays a run's choices (the seed is printed first); the
machine's timing still differs.

Env: SBX_SUPERVISOR, SBX_AGENT; SOAK_SECONDS, SOAK_SEED, SOAK_CLIENTS,
SOAK_STATE_MIB (the state folder's size, default 3072), SOAK_LOGS (a folder
the supervisors' logs are copied to).
"""
import os
import random
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from bench_table import emit  # noqa: E402
from sbx_harness import (MCP_SANDBOX_MODULES, RUNTIME, Supervisor, mcp_modules_tar,  # noqa: E402
                         register_run, rss_kb, small_asan_quarantine, stop_clean)
from soak_checks import (check_sandbox, check_snapshots, compare_metrics, fd_count,  # noqa: E402
                         kinds, leftovers, sanitizer_reports, scrape)
from soak_clients import AGENT_KILLED, START, Client, Ledger, Node  # noqa: E402
from soak_faults import RuntimeFaults, StateDisk, kill_agent  # noqa: E402
from soak_load import Worker  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
SECONDS = int(os.environ.get("SOAK_SECONDS", "120"))
CLIENTS = int(os.environ.get("SOAK_CLIENTS", "6"))
STATE_MIB = int(os.environ.get("SOAK_STATE_MIB", "3072"))
SEED = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(1 << 31))
KINDS = ("supervisor SIGKILL", "agent SIGKILL", "runtime failures", "state folder full")
# Bounds the clients' deadlines are set from (60 s and more: a loaded
# 2-core machine's room above them).
FLAGS = ["--acquire-timeout", "20", "--agent-idle-timeout", "15", "--body-timeout", "20",
         "--drain-timeout", "1", "--max-sandboxes", "48"]


class Soak:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="sbx-soak-")
        self.state = os.path.join(self.root, "state")
        self.ledger = Ledger()
        self.stop = threading.Event()
        self.runtime = RuntimeFaults(self.root, SEED, RUNTIME)
        self.disk = None
        self.node = Node(self.make)
        self.client = Client(self.node, self.ledger, "soak")
        self.checker = Worker(99, SEED, self.node, self.ledger, self.stop)
        self.scrapes = []
        self.mcp = None
        self.fault_log = []
        self.figures = {}
        self.phases = []  # where its time went, for the report

    def make(self):
        s = Supervisor(SUP, AGENT, state_dir=self.state, pool_size=2,
                       extra=FLAGS + ["--runtime", self.runtime.path])
        s.start(timeout=180)
        return s

    # ---- setup ----
    def setup(self):
        register_run(self.state, self.root)  # its sweep unmounts the tmpfs too
        self.disk = StateDisk(self.state, STATE_MIB)
        sup = self.node.start()
        sup.wait_ready(timeout=120)
        self.figures["fds_start"] = fd_count(sup.proc.pid)
        self.figures["rss_last_start"] = rss_kb(sup.proc.pid)
        self.mcp = self.mcp_sandbox()

    def mcp_sandbox(self):
        """A sandbox with server-everything (tests/mcp-servers) configured,
        for the MCP client; the agent-kill fault leaves it alone (its
        modules are 50 MB to copy in again)."""
        c = self.client
        ans = c.call("POST sandboxes", "POST", "/v1/sandboxes", {"timeout": 7200}, ok=(201,))
        assert ans.ok, ans.body
        sid = ans.json["id"]
        self.ledger.sandbox(sid, "mcp")
        ans = c.call("PUT files", "PUT", "/v1/sandboxes/%s/files?path=/workspace/nm.tar" % sid,
                     mcp_modules_tar(), deadline=180)
        assert ans.ok, ans.body
        ans = c.call("POST exec", "POST", "/v1/sandboxes/%s/exec" % sid,
                     {"cmd": "cd /workspace && tar xf nm.tar && rm nm.tar"}, deadline=180)
        assert ans.ok and ans.json["exit_code"] == 0, ans.body
        ans = c.call("PUT mcp", "PUT", "/v1/sandboxes/%s/mcp/everything" % sid, {
            "command": "node", "args": [MCP_SANDBOX_MODULES + "server-everything/dist/index.js"]})
        assert ans.ok, ans.body
        return sid

    # ---- faults ----
    def faults(self):
        rng = random.Random("%s:faults" % SEED)
        order = []
        until = time.monotonic() + 0.75 * SECONDS
        # Gaps of 4.5-9 s, shorter when a round of the four (some 20 s of
        # faults themselves) would not fit in a short run's three quarters;
        # and a short run goes on past them until each kind came once.
        most = min(9.0, max(1.5, (0.75 * SECONDS - 20) / len(KINDS)))
        done = set()
        while not self.stop.wait(rng.uniform(most / 2, most)) and \
                (time.monotonic() < until or len(done) < len(KINDS)):
            if not order:
                order = list(KINDS)
                rng.shuffle(order)
            kind = order.pop()
            done.add(kind)
            t = time.monotonic() - START
            try:
                what = getattr(self, "fault_" + kind.split()[0].replace("state", "disk"))(rng)
            except Exception as e:  # noqa: BLE001 - a fault that cannot be made is a problem
                self.ledger.problem("fault %s: %r" % (kind, e))
                continue
            self.fault_log.append("%6.1f s  %s: %s" % (t, kind, what))
            print("soak fault at %.1f s: %s: %s" % (t, kind, what), flush=True)

    def fault_supervisor(self, rng):
        s = scrape(self.client)
        if s:
            self.scrapes.append(s)
        with self.ledger.lock:
            held = [sid for sid, sb in self.ledger.sandboxes.items()
                    if not sb["deleted"] and not sb["failed"]]
        t0 = time.monotonic()
        self.node.kill()
        self.ledger.fault("supervisor SIGKILL")
        sup = self.node.start()
        took = time.monotonic() - t0
        self.back_after_restart(held)
        self.figures["rss_last_start"] = rss_kb(sup.proc.pid)
        return "killed and started again in %.1f s, %d sandboxes held" % (took, len(held))

    def back_after_restart(self, held):
        """Every sandbox held at the kill is listed again (those deleted or
        failed since aside) within 60 s."""
        deadline = time.monotonic() + 60
        while True:
            ans = self.client.call("GET sandboxes", "GET", "/v1/sandboxes")
            listed = {x["id"]: x["state"] for x in ans.json["sandboxes"]} if ans.ok else {}
            with self.ledger.lock:
                missing = [sid for sid in held if sid not in listed
                           and not self.ledger.sandboxes[sid]["deleted"]
                           and not self.ledger.sandboxes[sid]["failed"]]
            if ans.ok and not missing:
                return
            if time.monotonic() > deadline:
                self.ledger.problem("after a restart, not listed within 60 s: %s" % missing)
                return
            time.sleep(0.5)

    def fault_agent(self, rng):
        with self.ledger.lock:
            live = sorted(sid for sid, sb in self.ledger.sandboxes.items()
                          if not sb["deleted"] and not sb["failed"] and sid != self.mcp)
            if not live:
                return "no sandbox to kill"
            sid = rng.choice(live)
            self.ledger.sandboxes[sid]["failed"] = AGENT_KILLED
        if not kill_agent(self.state, sid):
            return "%s had no agent to kill" % sid
        self.ledger.fault("agent SIGKILL")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st = self.checker.state(sid)
            if st in ("failed", "gone"):
                return "%s's agent; the sandbox shows %s" % (sid, st)
            time.sleep(0.2)
        self.ledger.problem("sandbox %s's agent was killed; after 30 s it shows %r" % (sid, st))
        return "%s's agent, not reported" % sid

    def fault_runtime(self, rng):
        before = sum(self.runtime.failed().values())
        self.runtime.share(40)
        self.stop.wait(rng.uniform(5, 10))
        self.runtime.share(0)
        n = sum(self.runtime.failed().values()) - before
        self.ledger.fault("runtime call failed", n)
        self.ledger.fault("runtime failure window")
        return "40%% of run/create/start/exec failing: %d calls failed" % n

    def fault_disk(self, rng):
        # What was answered before is written back first (see "What a full
        # state folder costs"); from here until the file is gone a write
        # answered may be lost.
        os.sync()
        with self.ledger.lock:
            self.ledger.full.append([time.monotonic(), None])
        mib = self.disk.fill()
        self.ledger.fault("state folder full")
        hold = rng.uniform(3, 6)
        self.stop.wait(hold)
        self.disk.unfill()
        with self.ledger.lock:
            self.ledger.full[-1][1] = time.monotonic()
        return "filled with %.0f MiB for %.1f s" % (mib, hold)

    # ---- the run ----
    def run(self):
        workers = [Worker(i, SEED, self.node, self.ledger, self.stop,
                          mcp=self.mcp if i == 0 else None) for i in range(CLIENTS)]
        for w in workers:
            w.start()
        faults = threading.Thread(target=self.faults, daemon=True)
        faults.start()
        t0 = time.monotonic()
        self.stop.wait(SECONDS)
        self.stop.set()
        faults.join(120)
        for w in workers:
            w.join(240)
            if w.is_alive():
                self.ledger.problem("%s did not end within 240 s of the stop" % w.name)
        self.figures["load_s"] = time.monotonic() - t0
        self.runtime.share(0)
        self.disk.unfill()

    def check(self):
        led = self.ledger
        last = scrape(self.client)
        if last:
            self.scrapes.append(last)
        else:
            led.problem("the last scrape of /metrics failed")
        for s in self.scrapes:
            for text in compare_metrics(led, s):
                led.problem("metrics: " + text)
        with led.lock:
            sbs = [(sid, sb) for sid, sb in led.sandboxes.items() if not sb["deleted"]]
        for sid, sb in sbs:
            check_sandbox(self.checker, sid, sb)
        self.figures["restored"] = check_snapshots(self.checker)
        for sid, sb in sbs:
            self.checker.delete(sid)
        ans = self.client.call("GET sandboxes", "GET", "/v1/sandboxes")
        if ans.ok and ans.json["sandboxes"]:
            led.problem("sandboxes the clients never had: %s" % [x["id"] for x in ans.json["sandboxes"]])
            for x in ans.json["sandboxes"]:
                self.checker.delete(x["id"])
        sup = self.node.sup
        sup.wait_ready(timeout=120)
        time.sleep(1)
        self.figures["fds_end"] = fd_count(sup.proc.pid)
        self.figures["rss_end"] = rss_kb(sup.proc.pid)
        if self.figures["fds_end"] > self.figures["fds_start"] + 4:
            led.problem("the supervisor holds %d descriptors at the end, %d at its first start" % (
                self.figures["fds_end"], self.figures["fds_start"]))
        grown = self.figures["rss_end"] - self.figures["rss_last_start"]
        if grown > max(64 << 10, self.figures["rss_last_start"] // 2):
            led.problem("the supervisor's RSS grew by %d KiB over its last incarnation (%d KiB at "
                        "its start)" % (grown, self.figures["rss_last_start"]))

    def end(self):
        """The final stop (SIGINT: every sandbox destroyed, exit 0), what
        is left on the machine, the sanitizer's reports in any log."""
        led = self.ledger
        try:
            stop_clean(self.node.sup)
        except AssertionError as e:
            led.problem("the final stop: %s" % str(e)[-3000:])
        left = leftovers(self.state)
        self.figures["leaked"] = len(left)
        for x in left:
            led.problem("left after the stop: " + x)
        for r in sanitizer_reports(self.node.sups):
            led.problem("sanitizer: " + r)

    def cleanup(self):
        self.stop.set()
        self.runtime.share(0)
        keep = os.environ.get("SOAK_LOGS")
        if keep:
            os.makedirs(keep, exist_ok=True)
            for s in self.node.sups:
                shutil.copy(s.log_path, keep)
        try:
            for s in self.node.sups[:-1]:
                if s.alive():
                    s.proc.kill()
            if self.node.sups:
                self.node.sups[-1].cleanup()  # the state folder, its tmpfs included
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # ---- figures ----
    def report(self):
        led = self.ledger
        outcomes, refusals, worst = kinds(led)
        served = outcomes["ok"] + outcomes["refused"]
        faults = dict(led.faults)
        print("\nsoak: seed %d, %d clients, %.0f s of load, %d incarnations of the supervisor (%s)" % (
            SEED, CLIENTS, self.figures.get("load_s", 0), len(self.node.sups),
            ", ".join(self.phases)))
        print("| figure | value |\n|---|---|")
        print("| requests answered (ok / refused with the error shape) | %d (%d / %d) |" % (
            served, outcomes["ok"], outcomes["refused"]))
        print("| requests cut by a supervisor SIGKILL | %d |" % outcomes["cut"])
        print("| requests reset by their client on purpose | %d |" % outcomes["abandoned"])
        print("| hangs, unexplained drops, unclear errors | %d, %d, %d |" % (
            outcomes["hang"], outcomes["dropped"], outcomes["bad"]))
        print("| worst latency of an answer | %.2f s (%s) |" % worst)
        for k in sorted(faults):
            print("| faults: %s | %d |" % (k, faults[k]))
        for k, n in refusals.most_common():
            print("| errors: %s | %d |" % (k, n))
        print("| snapshots restored at the end | %d |" % self.figures.get("restored", 0))
        print("| supervisor descriptors, first start / end | %s / %s |" % (
            self.figures.get("fds_start"), self.figures.get("fds_end")))
        print("| supervisor RSS, last start / end | %s / %s KiB |" % (
            self.figures.get("rss_last_start"), self.figures.get("rss_end")))
        print("| leaked after the stop | %s |" % self.figures.get("leaked", "?"))
        print("| writes answered while the state folder was full, then lost (known, not judged) "
              "| %d |" % len(led.lost_exposed))
        print("| problems | %d |" % len(led.problems))
        print("\nfaults in order:\n" + "\n".join(self.fault_log))
        with led.lock:
            slow = sorted((r for r in led.requests if r[6] in ("ok", "refused")),
                          key=lambda r: r[3] - r[2], reverse=True)[:5]
        print("the slowest answers:\n" + "\n".join(
            "  %6.2f s  %s %s at %.1f s (%s, %s %s)" % (r[3] - r[2], r[0], r[8][:80], r[2] - START, r[7],
                                                      r[4], r[5] or "") for r in slow))
        if led.lost_exposed:
            print("lost while the state folder was full: " + ", ".join(led.lost_exposed[:20]))
        emit("soak.served", "requests answered in %d s under faults" % SECONDS, "sbx", n=served,
             ok=outcomes["ok"], refused=outcomes["refused"], cut=outcomes["cut"],
             abandoned=outcomes["abandoned"], s=round(self.figures.get("load_s", 0), 1))
        emit("soak.faults", "faults injected", "sbx", n=sum(faults.values()), **{
            k.replace(" ", "_"): v for k, v in faults.items()})
        emit("soak.errors", "refusals by route, status and code", "sbx",
             n=outcomes["refused"], **{k.replace(" ", "_"): v for k, v in refusals.items()})
        emit("soak.worst", "the worst latency of an answer (%s)" % worst[1], "sbx",
             n=served, s=round(worst[0], 2))
        emit("soak.leaked", "left on the machine after the final stop", "sbx",
             n=self.figures.get("leaked", -1), problems=len(led.problems))
        emit("soak.lost_full", "writes answered while the state folder was full, then lost", "sbx",
             n=len(led.lost_exposed))


def main():
    if not SUP or not AGENT:
        print("SBX_SUPERVISOR and SBX_AGENT must be set")
        return 2
    if shutil.which(RUNTIME) is None:
        print("%s not installed" % RUNTIME)
        return 77
    print("soak seed %d (replay its choices: SOAK_SEED=%d), %d s, %d clients" % (
        SEED, SEED, SECONDS, CLIENTS), flush=True)
    small_asan_quarantine(SUP)
    soak = Soak()
    try:
        for phase in ("setup", "run", "check", "end"):
            t0 = time.monotonic()
            getattr(soak, phase)()
            soak.phases.append("%s %.0f s" % (phase, time.monotonic() - t0))
    except BaseException as e:  # noqa: BLE001 - reported with the rest
        soak.ledger.problem("the soak itself: %r" % e)
        raise
    finally:
        soak.cleanup()
        soak.report()
    if soak.ledger.problems:
        print("\n%d problems (seed %d):\n%s" % (len(soak.ledger.problems), SEED,
                                               "\n".join(soak.ledger.problems[:200])))
        return 1
    print("soak passed (seed %d)" % SEED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
