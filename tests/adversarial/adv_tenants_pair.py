"""Alice and Bob on one node, for the adversarial tests that set one
tenant against another: a supervisor of tenants admin, alice and bob
(sbx_harness.tenants_supervisor), ready, with a sandbox of each. Stdlib
and the harness only; a test harness, never the product."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from sbx_harness import end_clean, small_asan_quarantine, tenants_supervisor  # noqa: E402


def start_pair(cls, sup_bin, agent, tokens, extra=(), pool_size=2):
    """On a test class: cls.sup (removed at the class's end, whatever
    happens), cls.req(who, method, path, body) with who's token, and
    cls.a, cls.b: alice's and bob's sandboxes (900 s)."""
    small_asan_quarantine(sup_bin)
    cls.sup = tenants_supervisor(sup_bin, agent, {n: {"token": t} for n, t in tokens.items()},
                                 tokens["admin"], extra=list(extra), pool_size=pool_size)
    cls.addClassCleanup(end_clean, cls.sup)
    cls.sup.wait_ready()
    a = cls.req("alice", "POST", "/v1/sandboxes", {"timeout": 900})
    b = cls.req("bob", "POST", "/v1/sandboxes", {"timeout": 900})
    assert a[0] == 201 and b[0] == 201, (a, b)
    cls.a, cls.b = a[2]["id"], b[2]["id"]
