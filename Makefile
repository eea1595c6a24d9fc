# Thin wrapper over CMake; see README.md.
#   make run    install deps, build, start the supervisor with a warm pool
#   make test   install deps, sanitizer build, every test (ctest)
#   make bench  install deps, release build, benchmarks (BEFORE=<another
#               build's sandbox-supervisor>: its HTTP edge rows beside ours)
#   make fuzz   sanitizer build, the libFuzzer targets for FUZZ_SECONDS each
#               (make test runs each for a fixed count of inputs)
#   make agent-image  the agent layer as an OCI layout and oci-archive
#   make images the supervisor's image and the agent layer (OCI layouts and
#               oci-archives in build/release/images)
JOBS      ?= $(shell nproc)
REL_DIR   := build/release
SAN_DIR   := build/sanitize
# -O2 in the test build too: gcc only warns of maybe-uninitialized values when
# it optimises, and `make run` builds optimised.
LISTEN    ?= 127.0.0.1:7070
STATE_DIR ?= /var/lib/sbx
POOL_SIZE ?= 4
# UPLINK=IFACE (or netns:NAME): egress by policy through it (API.md, "Network")
UPLINK    ?=

.PHONY: all deps build build-san run test bench lint fuzz clean agent-image k8s-deps images

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
	exec $(REL_DIR)/node-supervisor/sandbox-supervisor --listen $(LISTEN) \
	  --state-dir $(STATE_DIR) --pool-size $(POOL_SIZE) --print-example \
	  $(if $(UPLINK),--uplink $(UPLINK))

# The control plane the Kubernetes tests start: Debian's etcd and kubectl,
# a kube-apiserver built from Debian's source once per machine (about 3 min
# on 2 idle cores), cached in /var/cache/sbx-k8s (scripts/install-k8s).
k8s-deps: deps
	@scripts/install-k8s

# The release build too: gcc -O3 warns of things -O2 does not, and make run
# must keep building.
test: build build-san k8s-deps
	cd $(SAN_DIR) && ctest --output-on-failure -j$(JOBS)

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
# scripts/supervisor-image) and the agent layer.
images: build
	scripts/agent-image $(REL_DIR)/guest-agent/sandbox-agent $(REL_DIR)/images
	scripts/supervisor-image $(REL_DIR)/node-supervisor/sandbox-supervisor \
	  $(REL_DIR)/guest-agent/sandbox-agent $(REL_DIR)/images

# Then the images' rows (bench/bench_images.py: pools and cold creates of a
# store image, a 100 MB import over HTTP, 20 sandboxes' disk), issue 4's
# round trip at full size: 4 GiB up and back, sha256 both
# ways, supervisor and agent under 64 MiB RSS (skipped, saying why, without
# the disk space for it below the test's temporary state folder); and issue
# 3's 1 GiB of command output through SSE, its sha256 checked; then the
# port proxy beside the same server reached directly (bench/bench_ports.py).
# Snapshot, restore and fork of a 100 MiB and a 1 GiB layer beside tar |
# zstd, zstd -d | tar -x and cp -a of the same folder (bench/bench_snapshots.py);
# the same layer through the S3 store beside the local one (bench/bench_snapshots_s3.py);
# the snapshot round trip with a 1 GiB file, restored byte-identical (it_snapshots'
# test_round_trip with SBX_SNAP_BIG_MIB=1024; make test's is 50 MiB).
# Exec on another node's sandbox, relayed, beside the same exec on the node
# itself (bench/bench_relay.py: two supervisors as two nodes).
# Reuse after reset beside destroy and create (bench/bench_reset.py).
# The Kubernetes backend (bench/bench_k8s.py: a real kube-apiserver, the
# kubelet harness as one node): acquire from a pool of pods beside a pool of
# runc sandboxes, the release by the agent's reset beside the local one,
# and what the reset beats: a pod deleted and a new one made.
bench: build k8s-deps
	$(REL_DIR)/bench/sbx-bench --build-dir $(REL_DIR) --stream-runs 5 $(if $(BEFORE),--before $(BEFORE))
	/usr/bin/python3 bench/bench_restart.py --build-dir $(REL_DIR) $(if $(BEFORE),--before $(BEFORE))
	/usr/bin/python3 bench/bench_pause.py --build-dir $(REL_DIR)
	/usr/bin/python3 bench/bench_reset.py --build-dir $(REL_DIR)
	PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 bench/bench_k8s.py --build-dir $(REL_DIR)
	SBX_SUPERVISOR=$(CURDIR)/$(REL_DIR)/node-supervisor/sandbox-supervisor \
	  SBX_AGENT=$(CURDIR)/$(REL_DIR)/guest-agent/sandbox-agent SBX_UPLOAD_MB=4096 \
	  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 tests/integration/test_files_upload.py -v \
	  Uploads.test_big_upload_bounded_memory
	SBX_SUPERVISOR=$(CURDIR)/$(REL_DIR)/node-supervisor/sandbox-supervisor \
	  SBX_AGENT=$(CURDIR)/$(REL_DIR)/guest-agent/sandbox-agent \
	  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 bench/bench_images.py
	SBX_SUPERVISOR=$(CURDIR)/$(REL_DIR)/node-supervisor/sandbox-supervisor \
	  SBX_AGENT=$(CURDIR)/$(REL_DIR)/guest-agent/sandbox-agent SBX_IT_STREAM_MB=1024 \
	  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 tests/integration/test_exec_stream.py -v \
	  ExecStream.test_large_output_is_lossless
	SBX_SUPERVISOR=$(CURDIR)/$(REL_DIR)/node-supervisor/sandbox-supervisor \
	  SBX_AGENT=$(CURDIR)/$(REL_DIR)/guest-agent/sandbox-agent \
	  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 bench/bench_mcp.py 1000
	SBX_SUPERVISOR=$(CURDIR)/$(REL_DIR)/node-supervisor/sandbox-supervisor \
	  SBX_AGENT=$(CURDIR)/$(REL_DIR)/guest-agent/sandbox-agent \
	  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 bench/bench_ports.py
	SBX_SUPERVISOR=$(CURDIR)/$(REL_DIR)/node-supervisor/sandbox-supervisor \
	  SBX_AGENT=$(CURDIR)/$(REL_DIR)/guest-agent/sandbox-agent \
	  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 bench/bench_snapshots.py
	SBX_SUPERVISOR=$(CURDIR)/$(REL_DIR)/node-supervisor/sandbox-supervisor \
	  SBX_AGENT=$(CURDIR)/$(REL_DIR)/guest-agent/sandbox-agent \
	  SBX_S3_TOOL=$(CURDIR)/$(REL_DIR)/node-supervisor/sup-s3-tool \
	  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 bench/bench_snapshots_s3.py
	SBX_SUPERVISOR=$(CURDIR)/$(REL_DIR)/node-supervisor/sandbox-supervisor \
	  SBX_AGENT=$(CURDIR)/$(REL_DIR)/guest-agent/sandbox-agent SBX_SNAP_MIB=1024 SBX_SNAP_ROUNDS=1 \
	  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 bench/bench_snapshots.py
	SBX_SUPERVISOR=$(CURDIR)/$(REL_DIR)/node-supervisor/sandbox-supervisor \
	  SBX_AGENT=$(CURDIR)/$(REL_DIR)/guest-agent/sandbox-agent SBX_SNAP_BIG_MIB=1024 \
	  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 tests/integration/test_snapshots.py -v \
	  SnapshotsTest.test_round_trip
	SBX_SUPERVISOR=$(CURDIR)/$(REL_DIR)/node-supervisor/sandbox-supervisor \
	  SBX_AGENT=$(CURDIR)/$(REL_DIR)/guest-agent/sandbox-agent \
	  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 bench/bench_relay.py

clean:
	rm -rf build
