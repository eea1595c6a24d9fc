# Thin wrapper over CMake; see README.md.
#   make run    install deps, build, start the supervisor with a warm pool
#   make test   install deps, sanitizer build, every test (ctest)
#   make bench  install deps, release build, benchmarks, BENCHMARKS.md's
#               table (BEFORE=<another build's sandbox-supervisor>: its HTTP
#               edge and restart rows beside ours)
#   make bench-report  that table again from the last results
#   make soak   release build, the soak under faults for SOAK_SECONDS (600),
#               its figures into BENCHMARKS.md's table (make test runs 45 s
#               of it on the sanitizer build: it_soak_short)
#   make fuzz   sanitizer build, the libFuzzer targets for FUZZ_SECONDS each
#               (make test runs each for a fixed count of inputs)
#   make agent-image  the agent layer as an OCI layout and oci-archive
#   make images the supervisor's image, the agent layer and sbx's sandbox
#               images (sbx/base, sbx/code-interpreter: images/build; OCI
#               layouts and oci-archives in build/release/images)
#   make run IMAGES=code-interpreter  the same run with those sandbox images
#               imported (sbx/NAME; names separated by spaces)
JOBS      ?= $(shell nproc)
REL_DIR   := build/release
SAN_DIR   := build/sanitize
# -O2 in the test build too: gcc only warns of maybe-uninitialized values when
# it optimises, and `make run` builds optimised.
LISTEN    ?= 127.0.0.1:7070
STATE_DIR ?= /var/lib/sbx
POOL_SIZE ?= 4
# pools grow with bursts of creates up to this, and back to POOL_SIZE once quiet
POOL_MAX  ?= 32
# UPLINK=IFACE (or netns:NAME): egress by policy through it (API.md, "Network")
UPLINK    ?=
# IMAGES=code-interpreter base browser desktop: sbx's sandbox images make run imports
IMAGES    ?=
SANDBOX_IMAGES := base code-interpreter browser desktop

.PHONY: all deps build build-san run test test-desktop bench bench-report lint fuzz clean agent-image k8s-deps \
        images soak sandbox-images

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake -S . -B $(REL_DIR) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(REL_DIR) -j$(JOBS)

build-san: deps
	@cmake -S . -B $(SAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSBX_SANITIZE=ON >/dev/null
	@cmake --build $(SAN_DIR) -j$(JOBS)

run: build
	@for i in $(IMAGES); do images/build $$i $(REL_DIR)/images || exit 1; done
	exec $(REL_DIR)/node-supervisor/sandbox-supervisor --listen $(LISTEN) \
	  --state-dir $(STATE_DIR) --pool-size $(POOL_SIZE) --pool-max $(POOL_MAX) --print-example \
	  $(if $(UPLINK),--uplink $(UPLINK)) \
	  $(foreach i,$(IMAGES),--import-image $(REL_DIR)/images/sbx-$(i))

# sbx's sandbox images for the tests (it_contexts, it_browser; it_desktop's
# is built by make test-desktop),
# without the agent layer (the sanitizer build's agent runs in them): the
# Debian part is built once per machine and cached (images/build on a shared
# 2-core machine: 356 s for code-interpreter, 435 MB of gzip layers; 272 s
# for browser, 363 MB; 268 s for desktop, 451 MB), later runs take seconds.
sandbox-images: deps
	images/build code-interpreter $(SAN_DIR)/sandbox-images
	images/build browser $(SAN_DIR)/sandbox-images

# The control plane the Kubernetes tests start: Debian's etcd and kubectl,
# a kube-apiserver built from Debian's source once per machine (about 3 min
# on 2 idle cores), cached in /var/cache/sbx-k8s (scripts/install-k8s).
k8s-deps: deps
	@scripts/install-k8s

# The release build too: gcc -O3 warns of things -O2 does not, and make run
# must keep building.
test: build build-san k8s-deps sandbox-images
	cd $(SAN_DIR) && ctest --output-on-failure -j$(JOBS) -LE desktop

# The desktop sandbox's test (label desktop), left out of make test for its
# image (about 5 minutes once per machine): run it after a change to the
# desktop image or the port proxy.
test-desktop: build-san
	images/build desktop $(SAN_DIR)/sandbox-images
	cd $(SAN_DIR) && ctest --output-on-failure -L desktop

lint: build
	scripts/lint $(REL_DIR)

# The fuzz tests of make test (ctest -R _fuzz_; CONTRIBUTING.md, "Fuzzing"),
# each for FUZZ_SECONDS instead of its count of inputs
# (protocol/fuzz/run_fuzz.cmake). At most 240: the tests' timeout is 300 s.
FUZZ_SECONDS ?= 240
fuzz: build-san
	cd $(SAN_DIR) && SBX_FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --output-on-failure -j$(JOBS) -R '_fuzz_'

# The agent layer: OCI layout and oci-archive FROM scratch holding only
# /.sbx/sandbox-agent (see guest-agent/Dockerfile.example).
agent-image: build
	scripts/agent-image $(REL_DIR)/guest-agent/sandbox-agent $(REL_DIR)/agent-image

# The images daemonset/ runs: the supervisor's (FROM scratch: the
# supervisor, the agent, runc, mkfs.ext4 and the libraries they load; see
# scripts/supervisor-image) and the agent layer; and sbx's sandbox images
# from Debian's packages (images/build, one recipe per image in images/),
# each with the agent layer on top.
images: build
	scripts/agent-image $(REL_DIR)/guest-agent/sandbox-agent $(REL_DIR)/images
	scripts/supervisor-image $(REL_DIR)/node-supervisor/sandbox-supervisor \
	  $(REL_DIR)/guest-agent/sandbox-agent $(REL_DIR)/images
	for i in $(SANDBOX_IMAGES); do \
	  images/build $$i $(REL_DIR)/images $(REL_DIR)/guest-agent/sandbox-agent || exit 1; done

# Every bench, each run by bench/bench_run.py: its rows (JSON lines), its
# printed detail and the machine's load go to $(BENCH_OUT); then
# bench-report writes BENCHMARKS.md's table and each bench's detail from
# them. A bench that fails is recorded as failed and the rest still run;
# make bench then fails at the end. BENCHMARKS.md, "How to run" and
# "Method", says what each figure is.
#   sbx-bench: exec paths, acquire, cold create, SSE, files, the fork bomb,
#     the HTTP edge (BEFORE's beside ours), gVisor;
#   restart, pause, reset, burst, k8s: bench/bench_<name>.py;
#   files-4gib: issue 4's round trip at full size, 4 GiB up and back (skipped,
#     saying why, without the disk space for it below the temporary folder);
#   images, mcp, ports, snapshots (100 MiB), snapshots-s3, snapshots-1gib,
#     relay, tls: bench/bench_<name>.py;
#   sse-1gib: issue 3's 1 GiB of output through SSE, sha256 checked;
#   contexts: code contexts on sbx/code-interpreter (bench/bench_contexts.py);
#   snapshot-roundtrip-1gib: it_snapshots' round trip with a 1 GiB file
#     (make test's is 50 MiB).
BENCH_OUT := $(REL_DIR)/bench-results
BENCH_RUN := PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 bench/bench_run.py --out $(BENCH_OUT)
BENCH_ENV := SBX_SUPERVISOR=$(CURDIR)/$(REL_DIR)/node-supervisor/sandbox-supervisor \
  SBX_AGENT=$(CURDIR)/$(REL_DIR)/guest-agent/sandbox-agent
# (the soak's results in $(BENCH_OUT) are make soak's: kept)
bench: build k8s-deps
	@mkdir -p $(BENCH_OUT)
	find $(BENCH_OUT) -mindepth 1 -maxdepth 1 ! -name 'soak.*' -exec rm -rf {} +
	-$(BENCH_RUN) sbx-bench -- $(REL_DIR)/bench/sbx-bench --build-dir $(REL_DIR) --stream-runs 5 \
	  $(if $(BEFORE),--before $(BEFORE))
	-$(BENCH_RUN) restart -- /usr/bin/python3 bench/bench_restart.py --build-dir $(REL_DIR) \
	  $(if $(BEFORE),--before $(BEFORE))
	-$(BENCH_RUN) pause -- /usr/bin/python3 bench/bench_pause.py --build-dir $(REL_DIR)
	-$(BENCH_RUN) reset -- /usr/bin/python3 bench/bench_reset.py --build-dir $(REL_DIR)
	-$(BENCH_RUN) burst -- /usr/bin/python3 bench/bench_burst.py --build-dir $(REL_DIR)
	-$(BENCH_RUN) k8s -- /usr/bin/python3 bench/bench_k8s.py --build-dir $(REL_DIR)
	-$(BENCH_ENV) SBX_UPLOAD_MB=4096 $(BENCH_RUN) files-4gib -- \
	  /usr/bin/python3 tests/integration/test_files_upload.py -v Uploads.test_big_upload_bounded_memory
	-$(BENCH_ENV) $(BENCH_RUN) images -- /usr/bin/python3 bench/bench_images.py
	-$(BENCH_ENV) SBX_IT_STREAM_MB=1024 $(BENCH_RUN) sse-1gib -- \
	  /usr/bin/python3 tests/integration/test_exec_stream.py -v ExecStream.test_large_output_is_lossless
	-$(BENCH_ENV) $(BENCH_RUN) mcp -- /usr/bin/python3 bench/bench_mcp.py 1000
	-$(BENCH_ENV) SBX_PORTS_ROUNDS=3 $(BENCH_RUN) ports -- /usr/bin/python3 bench/bench_ports.py
	-$(BENCH_ENV) $(BENCH_RUN) snapshots -- /usr/bin/python3 bench/bench_snapshots.py
	-$(BENCH_ENV) SBX_S3_TOOL=$(CURDIR)/$(REL_DIR)/node-supervisor/sup-s3-tool \
	  $(BENCH_RUN) snapshots-s3 -- /usr/bin/python3 bench/bench_snapshots_s3.py
	-$(BENCH_ENV) SBX_SNAP_MIB=1024 SBX_SNAP_ROUNDS=1 $(BENCH_RUN) snapshots-1gib -- \
	  /usr/bin/python3 bench/bench_snapshots.py
	-$(BENCH_ENV) SBX_SNAP_BIG_MIB=1024 $(BENCH_RUN) snapshot-roundtrip-1gib -- \
	  /usr/bin/python3 tests/integration/test_snapshots.py -v SnapshotsTest.test_round_trip
	-$(BENCH_ENV) $(BENCH_RUN) relay -- /usr/bin/python3 bench/bench_relay.py
	-$(BENCH_ENV) $(BENCH_RUN) tls -- /usr/bin/python3 bench/bench_tls.py
	-$(BENCH_ENV) $(BENCH_RUN) contexts -- /usr/bin/python3 bench/bench_contexts.py
	@$(MAKE) --no-print-directory bench-report

# The soak under faults (tests/integration/test_soak.py: what it injects,
# what it checks) for SOAK_SECONDS on the release build, run by
# bench_run.py like a bench (its figures and the load beside it into
# $(BENCH_OUT)), then BENCHMARKS.md's table. Run it in an idle window:
# `heavy --status` free for its length; SOAK_SEED replays a run's choices.
SOAK_SECONDS ?= 600
soak: build
	-$(BENCH_ENV) SOAK_SECONDS=$(SOAK_SECONDS) $(BENCH_RUN) soak -- \
	  /usr/bin/python3 tests/integration/test_soak.py
	@$(MAKE) --no-print-directory bench-report

# BENCHMARKS.md's table and details again from the last results of make
# bench, without running anything (RESULTS=DIR: another folder of them;
# RESULTS=bench/seed: the figures seeded from the dated sections).
RESULTS ?= $(BENCH_OUT)
bench-report:
	PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 bench/bench_report.py --results $(RESULTS)

clean:
	rm -rf build
