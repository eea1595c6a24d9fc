"""What the soak (test_soak.py) asserts once its load has stopped, and its
view of /metrics:

- every acknowledged write (a PUT answered 200) is in its sandbox with its
  checksum, unless the soak killed that sandbox's agent (then the sandbox
  must show "failed" or be gone: that is how the product reports the loss);
  a sandbox's /workspace/soak holds no file whose upload was refused or
  reset (an upload that fails leaves nothing, no temporary file either),
  only acknowledged ones and those whose answer a SIGKILL cut;
- every snapshot answered 201 and not deleted is listed, and every listed
  snapshot restores (a new sandbox from it, with the files acknowledged
  in its source before the snapshot was asked for);
- /metrics agrees with what the clients saw, per incarnation of the
  supervisor (its counters start again at each start; a SIGKILL loses
  them, so an incarnation is checked by the scrape taken just before its
  kill): for each route and status, the answers clients had received
  before the scrape was sent are at most the counter, and the counter is
  at most the answers they received once it was answered plus their
  requests of that route without an answer (cut by the kill, reset on
  purpose); sbx_execs_total the same against POST exec;
- nothing is left on the machine after the final stop (the harness's
  checks, and the cgroups and router's names a supervisor would make).
Stdlib only; a test's helper, never the product.
"""
import collections
import hashlib
import os
import re
import subprocess
import time

from sbx_harness import runtimes, state_tag, what_is_left
from sbx_leftovers import CGROUP_ROOT, loops_left
from soak_load import files_path

# The routes whose counters are held to the clients' counts.
COMPARED = ("POST sandboxes", "DELETE sandbox", "POST exec", "PUT files", "GET files",
            "POST processes", "POST snapshot")
_SERIES = re.compile(r'^(sbx_\w+)\{([^}]*)\} (\S+)$')


def parse_metrics(text):
    """{(name, frozenset of label pairs): value}."""
    out = {}
    for line in text.splitlines():
        m = _SERIES.match(line)
        if m:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def scrape(client):
    """(epoch, s0, s1, series) or None when the scrape failed."""
    cur = client.node.current(60)
    s0 = time.monotonic()
    ans = client.call("GET metrics", "GET", "/metrics")
    s1 = time.monotonic()
    if not ans.ok or cur is None:
        return None
    return cur[0], s0, s1, parse_metrics(ans.body.decode())


def compare_metrics(ledger, scraped):
    """The counters of one scrape against the clients' records; the
    mismatches as words ([]: they agree)."""
    epoch, s0, s1, series = scraped
    with ledger.lock:
        recs = [r for r in ledger.requests if r[1] == epoch]
    bad = []
    answered = ("ok", "refused", "bad")
    for route in COMPARED:
        mine = [r for r in recs if r[0] == route]
        unanswered = sum(1 for r in mine if r[6] not in answered and r[2] < s1)
        statuses = {int(dict(k[1])["status"]) for k in series
                    if k[0] == "sbx_http_requests_total" and dict(k[1]).get("route") == route}
        statuses |= {r[4] for r in mine if r[6] in answered}
        for st in sorted(statuses):
            server = series.get(("sbx_http_requests_total",
                                 frozenset({("route", route), ("status", str(st))})), 0)
            lower = sum(1 for r in mine if r[4] == st and r[6] in answered and r[3] < s0)
            upper = sum(1 for r in mine if r[4] == st and r[6] in answered and r[2] < s1) + unanswered
            if not lower <= server <= upper:
                bad.append("epoch %d: %s %d counted %d, clients saw %d..%d" % (
                    epoch, route, st, server, lower, upper))
    execs = sum(v for k, v in series.items() if k[0] == "sbx_execs_total")
    mine = [r for r in recs if r[0] == "POST exec"]
    lower = sum(1 for r in mine if r[4] == 200 and r[3] < s0)
    upper = sum(1 for r in mine if r[2] < s1)
    if not lower <= execs <= upper:
        bad.append("epoch %d: sbx_execs_total %d, clients saw %d..%d" % (epoch, execs, lower, upper))
    return bad


def check_sandbox(w, sid, sb):
    """One sandbox of the ledger at the end; problems go to the ledger."""
    led = w.ledger
    st = w.state(sid)
    if sb["failed"]:
        if st not in ("failed", "gone"):
            led.problem("sandbox %s (%s) shows %r" % (sid, sb["failed"], st))
        return
    if st != "running":
        led.problem("sandbox %s: %r at the end, with no fault of the soak's" % (sid, st))
        return
    for path, sha in sorted(sb["files"].items()):
        ans = w.c.call("GET files", "GET", files_path(sid, path), deadline=120)
        got = hashlib.sha256(ans.body).hexdigest() if ans.ok else "%s %s" % (ans.status, ans.body[:200])
        if got == sha:
            continue
        if path in sb["exposed"]:
            with led.lock:
                led.lost_exposed.append("%s in %s" % (path, sid))
        else:
            led.problem("acknowledged write lost: %s in %s: %s, written as %s" % (path, sid, got, sha))
    ans = w.c.call("POST exec", "POST", "/v1/sandboxes/%s/exec" % sid,
                   {"cmd": "find /workspace/soak -mindepth 1 -type f 2>/dev/null; true"})
    if not ans.ok:
        led.problem("sandbox %s: listing /workspace/soak: %s %s" % (sid, ans.status, ans.body[:200]))
        return
    there = set(ans.json["stdout"].split())
    acked = {p for p in sb["files"] if p.startswith("/workspace/soak/")}
    for p in sorted(acked - there - sb["exposed"]):
        led.problem("acknowledged write lost: %s not in %s's listing" % (p, sid))
    for p in sorted(there - acked - sb["unknown"]):
        led.problem("%s in %s: a file no upload was acknowledged for%s" % (
            p, sid, " (its upload was refused or reset)" if p in sb["absent"] else ""))


def check_snapshots(w):
    """Every snapshot answered 201 and not deleted listed; every listed one
    restored (the ledger's with their files checked)."""
    led = w.ledger
    ans = w.c.call("GET snapshots", "GET", "/v1/snapshots")
    if not ans.ok:
        led.problem("GET /v1/snapshots: %s %s" % (ans.status, ans.body[:200]))
        return 0
    listed = [s["id"] for s in ans.json["snapshots"]]
    with led.lock:
        known = {k: v for k, v in led.snapshots.items() if not v["deleted"]}
    for snap in sorted(set(known) - set(listed)):
        led.problem("snapshot %s was answered 201 and is not listed" % snap)
    restored = 0
    for snap in listed:
        if snap not in led.snapshots:
            led.snapshots[snap] = {"sandbox": None, "files": {}, "deleted": False}
        if w.restore(snap, sample=len(led.snapshots[snap]["files"])):
            restored += 1
        else:
            led.problem("listed snapshot %s did not restore" % snap)
    return restored


def leftovers(state_dir):
    """What a stopped supervisor of state_dir left, as words for a message:
    the harness's what_is_left (containers, their cgroups' processes,
    runtime calls, mounts, loop devices) once loops_left has detached the
    copies of the run's mounts that other tests' namespaces took meanwhile
    (not the supervisor's doing), less the state folder's own mount (the
    soak's tmpfs) and its copies; and what a supervisor makes beyond its
    folder: the container cgroups, the router's namespace, links and nft
    tables."""
    tag = state_tag(state_dir)
    own = "mount " + os.path.realpath(state_dir)
    loops_left(state_dir)
    # (the tmpfs is still mounted here: another test's namespace may copy
    # it again at any time)
    left = [x for x in what_is_left(state_dir, runtimes(state_dir))
            if x != own and not x.startswith(own + " (of process ")]
    for hier in os.listdir(CGROUP_ROOT) if os.path.isdir(CGROUP_ROOT) else []:
        parent = os.path.join(CGROUP_ROOT, hier, "sbx")
        if os.path.isdir(parent):
            left += ["cgroup " + os.path.join(parent, n) for n in os.listdir(parent)
                     if n.startswith("sbx-%s-" % tag)]
    name = "sbx-" + tag
    if os.path.exists("/run/netns/" + name):
        left.append("netns " + name)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    left += ["link " + n for n in re.findall(r"^\d+: ([^:@]+)", links, re.M) if tag in n]
    nft = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    left += ["nft " + t for t in nft.splitlines() if tag in t]
    return left


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def sanitizer_reports(sups):
    """Logs of any incarnation that carry a sanitizer's report."""
    out = []
    for s in sups:
        try:
            with open(s.log_path, errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        for needle in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            if needle in text:
                i = text.index(needle)
                out.append("%s: %s" % (os.path.basename(s.log_path), text[max(0, i - 200):i + 1500]))
    return out


def kinds(ledger):
    """(requests by outcome, refusals by route/status/code, worst latency
    (s, route))."""
    with ledger.lock:
        recs = list(ledger.requests)
    outcomes = collections.Counter(r[6] for r in recs)
    refusals = collections.Counter("%s %s %s" % (r[0], r[4], r[5]) for r in recs if r[6] == "refused")
    worst = max(((r[3] - r[2], r[0]) for r in recs if r[6] in ("ok", "refused")), default=(0, "-"))
    return outcomes, refusals, worst
