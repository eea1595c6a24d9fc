"""The OpenAPI 3.1 document of the API (node-supervisor/openapi.json)
against what it describes:
- it is a valid OpenAPI 3.1 document (the validator pinned in
  tests/openapi/package-lock.json, run by tests/openapi/check.mjs);
- every route row of every family's table in node-supervisor/src (read from
  the C sources through the C preprocessor, so macros such as PROCS or
  PROXY(m) expand as the compiler sees them) has its path and method in the
  document, so a route added without its entry fails here;
- every example request in API.md (a ```json request block, under the
  heading that names its method and path) validates against that
  operation's JSON request schema;
- a real supervisor serves the file byte for byte at GET /v1/openapi.json
  (with the token; 401 without, as every /v1 route; HEAD the same head).
- a bounded property-based fuzz run (tests/openapi/fuzz.mjs, fast-check)
  sends requests drawn from the document to that supervisor, with one live
  sandbox for {id}, for SBX_FUZZ_SECONDS (default 5): any 5xx, or an error
  answer without the error shape, fails with the shrunk request; the
  supervisor must then stop clean (exit 0, no sanitizer report).
The supervisor (a pool of one) is stopped and its state folder and
containers removed, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import glob
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, stop_clean  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOC = os.path.join(TOP, "node-supervisor", "openapi.json")
SRC = os.path.join(TOP, "node-supervisor", "src")
API_MD = os.path.join(TOP, "node-supervisor", "API.md")
TOOLS = os.path.join(TOP, "tests", "openapi")
SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def load_doc():
    with open(DOC, "rb") as f:
        raw = f.read()
    return raw, json.loads(raw)


# ---- the C route tables ----

def c_tokens(text):
    """C tokens that matter here: string literals (decoded), braces, commas,
    anything else as one word."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j, out = i + 1, []
            while text[j] != '"':
                if text[j] == "\\":
                    out.append(text[j + 1])
                    j += 2
                else:
                    out.append(text[j])
                    j += 1
            yield ("str", "".join(out))
            i = j + 1
        elif c in "{},":
            yield (c, c)
            i += 1
        elif c.isspace():
            i += 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '{},"':
                j += 1
            yield ("word", text[i:j])
            i = j


def route_rows(path):
    """[(method, pattern)] of every sup_http_route table in one C file,
    its macros expanded by cpp (only the file's own #defines: no headers)."""
    with open(path) as f:
        src = f.read()
    tables = re.findall(r"sup_http_route\s+\w+\s*\[\s*\]\s*=\s*(\{.*?\n\});", src, re.S)
    if not tables:
        return []
    defines = re.findall(r"^#define(?:\\\n|[^\n])*", src, re.M)
    unit = "\n".join(defines) + "\n" + "\n".join("SBX_TABLE " + t for t in tables) + "\n"
    out = subprocess.run(["cpp", "-P", "-undef"], input=unit, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, (path, out.stderr)
    rows = []
    depth, fields, cur = 0, [], []
    parts = out.stdout.split("SBX_TABLE")
    assert len(parts) == len(tables) + 1, (path, out.stdout)
    for kind, val in c_tokens("".join(parts[1:])):
        if kind == "{":
            depth += 1
            if depth == 2:
                fields, cur = [], []
            continue
        if kind == "}":
            if depth == 2:
                fields.append(cur)
                strs = ["".join(v for k, v in f if k == "str") for f in fields[:2]]
                assert all(k == "str" for f in fields[:2] for k, _ in f), (path, fields[:2])
                rows.append((strs[0], strs[1]))
            depth -= 1
            continue
        assert depth >= 1, (path, kind, val)
        if depth == 2:
            if kind == ",":
                fields.append(cur)
                cur = []
            else:
                cur.append((kind, val))
    assert rows, (path, "a route table without rows read")
    return rows


def all_routes():
    """{file: rows} of every C file defining a sup_http_family."""
    found = {}
    for path in sorted(glob.glob(os.path.join(SRC, "**", "*.c"), recursive=True)):
        with open(path) as f:
            src = f.read()
        if not re.search(r"^const sup_http_family \w+ = \{", src, re.M):
            continue
        found[os.path.relpath(path, TOP)] = route_rows(path)
    return found


def shape(path):
    """A path with its parameters' names left out: {id}/{pid}/{ref}/{name}
    are all '{}'."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def doc_ops(doc):
    """{(METHOD, shape): (path, method)} of every operation."""
    ops = {}
    for path, item in doc["paths"].items():
        for m in item:
            if m.upper() in METHODS:
                ops[(m.upper(), shape(path))] = (path, m)
    return ops


# ---- API.md ----

HEADING_OP = re.compile(r"`(%s) (/[^`\s?\[]*)" % "|".join(METHODS))


def api_examples():
    """[(line, method, path or None, body)] of every ```json request block
    in API.md: method and path from the nearest heading above that names
    one (its first `METHOD /path` span)."""
    with open(API_MD) as f:
        lines = f.read().split("\n")
    out, op, i = [], None, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            m = HEADING_OP.search(line)
            op = (m.group(1), m.group(2)) if m else None
        elif line.strip() == "```json request":
            start = i + 1
            j = start
            while lines[j].strip() != "```":
                j += 1
            body = json.loads("\n".join(lines[start:j]))
            out.append((start, op[0] if op else None, op[1] if op else None, body))
            i = j
        i += 1
    return out


def pointer(*parts):
    return "#/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


class DocumentTest(unittest.TestCase):
    def test_every_route_row_is_in_the_document(self):
        _, doc = load_doc()
        ops = doc_ops(doc)
        tables = all_routes()
        self.assertGreaterEqual(len(tables), 5, tables)  # sandboxes, files, procs, metrics, images...
        missing, n, covered, rests = [], 0, set(), []
        for path, rows in tables.items():
            self.assertTrue(rows, "%s defines a family but no route row was read from it" % path)
            for method, pattern in rows:
                # The relay's takeover row ("*" "{*}") is matched by no
                # path: the edge hands it a request for another node's
                # sandbox, whose own operation is the document's.
                if (method, pattern) == ("*", "{*}"):
                    continue
                n += 1
                self.assertIn(method, METHODS, (path, method, pattern))
                # {*} ends a pattern taking the rest of the path: the
                # document has the path without it and with one more
                # parameter ({rest}).
                want = [pattern[:-3], pattern[:-3] + "/{}"] if pattern.endswith("{*}") else [pattern]
                if pattern.endswith("{*}"):
                    rests.append((method, shape(pattern[:-3]) + "/"))
                for p in want:
                    covered.add((method, shape(p)))
                    if (method, shape(p)) not in ops:
                        missing.append("%s %s (%s)" % (method, p, path))
        self.assertEqual(missing, [], "route rows without an operation in openapi.json")
        # And the other way: an operation no row serves is a stale promise.
        # (a {*} row serves every path below its prefix: the proxy's own
        # .../url is one of them)
        stale = sorted("%s %s" % (m, ops[(m, sh)][0]) for (m, sh) in ops
                       if (m, sh) not in covered
                       and not any(m == rm and sh.startswith(rp) for rm, rp in rests))
        self.assertEqual(stale, [], "operations in openapi.json that no route row serves")
        print("%d route rows of %d families, each in the document (%d operations)"
              % (n, len(tables), len(ops)))

    def test_row_reader_reads_macros(self):
        # The reader itself, on a table written as the families write theirs.
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as f:
            f.write('#define P "/v1/x/{id}"\n#define R(m) \\\n\t{ m, P "/{pid}{*}", m " r", 0 }\n'
                    'static const sup_http_route routes[] = {\n'
                    '\t{ "GET", P, "GET x", SUP_BODY_NONE, 0, NULL, act },\n\tR("PUT"),\n};\n')
        try:
            self.assertEqual(route_rows(f.name), [("GET", "/v1/x/{id}"), ("PUT", "/v1/x/{id}/{pid}{*}")])
        finally:
            os.unlink(f.name)

    def test_document_and_api_md_examples_validate(self):
        _, doc = load_doc()
        ops = doc_ops(doc)
        examples = api_examples()
        self.assertGreaterEqual(len(examples), 10, "API.md's ```json request blocks")
        job, bad = {"document": DOC, "examples": []}, []
        for line, method, path, body in examples:
            where = "API.md:%d" % line
            if method is None:
                bad.append("%s: no `METHOD /path` heading above it" % where)
                continue
            key = (method, shape(path))
            if key not in ops:
                bad.append("%s: %s %s is not in the document" % (where, method, path))
                continue
            dpath, dm = ops[key]
            rb = doc["paths"][dpath][dm].get("requestBody", {}).get("content", {})
            if "application/json" not in rb:
                bad.append("%s: %s %s takes no JSON body in the document" % (where, method, path))
                continue
            job["examples"].append({"schema": pointer("paths", dpath, dm, "requestBody", "content",
                                                      "application/json", "schema"),
                                    "body": body, "where": where})
        self.assertEqual(bad, [])
        # A body that must not validate, so that the validator is seen to say no.
        job["examples"].append({"schema": pointer("paths", "/v1/sandboxes/{id}/exec", "post",
                                                  "requestBody", "content", "application/json",
                                                  "schema"),
                                "body": {"argv": ["true"], "cmd": "true"}, "where": "self-check"})
        node_modules = os.path.join(TOOLS, "node_modules")
        self.assertTrue(os.path.isdir(node_modules),
                        "%s missing: run scripts/install-deps (make test does)" % node_modules)
        out = subprocess.run(["node", os.path.join(TOOLS, "check.mjs")], input=json.dumps(job),
                             capture_output=True, text=True, timeout=120, cwd=TOOLS)
        print(out.stdout, out.stderr)
        lines = out.stdout.splitlines()
        self.assertIn("openapi: valid OpenAPI 3.1", lines)
        self.assertTrue(lines[-1].startswith("self-check: invalid"), lines[-1:])
        self.assertEqual(out.returncode, 1)  # the self-check, and nothing else
        fails = [l for l in lines if " invalid against " in l or "no schema at" in l]
        self.assertEqual(fails, [lines[-1]])


class ServedTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert SUP and AGENT, "SBX_SUPERVISOR and SBX_AGENT must be set"
        cls.sup = Supervisor(SUP, AGENT, pool_size=1)
        # secrets kept (their key beside the state folder), so that their
        # routes answer what the document says rather than 501
        cls.sup.extra = ["--secrets-key", os.path.join(cls.sup.root, "secrets.key")]
        try:
            cls.sup.start()
        except Exception:
            cls.sup.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            stop_clean(cls.sup)
        finally:
            cls.sup.cleanup()

    def test_served_document_is_the_file(self):
        raw, _ = load_doc()
        c = self.sup.conn()
        try:
            c.request("GET", "/v1/openapi.json", headers={"Authorization": "Bearer " + self.sup.token})
            r = c.getresponse()
            body = r.read()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.getheader("Content-Type"), "application/json")
            self.assertEqual(int(r.getheader("Content-Length")), len(raw))
            self.assertEqual(body, raw)
            # HEAD: the same head, no body (the connection goes on).
            c.request("HEAD", "/v1/openapi.json", headers={"Authorization": "Bearer " + self.sup.token})
            r = c.getresponse()
            self.assertEqual((r.status, r.read()), (200, b""))
            self.assertEqual(int(r.getheader("Content-Length")), len(raw))
        finally:
            c.close()
        st, hdrs, body = self.sup.request("GET", "/v1/openapi.json", token=False)
        self.assertEqual(st, 401)
        self.assertEqual(body["error"]["code"], "unauthorized")
        st, hdrs, body = self.sup.request("POST", "/v1/openapi.json", body="{}")
        self.assertEqual(st, 405)
        self.assertEqual(hdrs.get("allow"), "GET")

    def test_fuzz_no_5xx(self):
        sb = self.sup.create()
        victim = self.sup.create()
        env = dict(os.environ, SBX_URL="http://127.0.0.1:%d" % self.sup.port, SBX_TOKEN=self.sup.token,
                   SBX_SANDBOX=sb["id"], SBX_VICTIM=victim["id"],
                   SBX_FUZZ_SECONDS=os.environ.get("SBX_FUZZ_SECONDS", "5"))
        out = subprocess.run(["node", os.path.join(TOOLS, "fuzz.mjs"), DOC], env=env, cwd=TOOLS,
                             capture_output=True, text=True, timeout=120)
        print(out.stdout, out.stderr)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr + self.sup.log())
        m = re.search(r"fuzz: (\d+) requests over (\d+) operations", out.stdout)
        self.assertTrue(m, out.stdout)
        self.assertGreaterEqual(int(m.group(2)), 20)
        self.assertGreater(int(m.group(1)), 0)
        # The sandbox the draws ran against is still there and answers:
        # every draw that can end or freeze a sandbox went to the victim.
        st, _, body = self.sup.exec(sb["id"], argv=["echo", "ok"])
        self.assertEqual((st, body.get("stdout")), (200, "ok\n"), "%s (%s)" % (body, out.stdout))


if __name__ == "__main__":
    unittest.main(verbosity=2)
