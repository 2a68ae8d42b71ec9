# gorun's developer entry points. `make test` is what CI runs (.ci/run).
GO ?= go
# Debian packages the tests need: mandoc lints the man pages; iproute2 and
# openssh-server build the multi-host test rig (network namespaces, sshd);
# chromium renders goprof's HTML page for its screenshot test.
TEST_DEBS := mandoc iproute2 openssh-server openssh-client chromium
BENCH_DEBS := openmpi-bin libopenmpi-dev hyperfine

.PHONY: all build test deps bench-deps vet bench-launch bench-mpi bench-tcp bench-choice bench-ddp bench-zero bench-gpt bench-compress bench-profile man

all: build

build:
	$(GO) build ./...

# deps installs what the tests need when it is missing (as root, from
# Debian); without root it says what is missing and the tests that need it skip.
deps:
	@missing=""; \
	command -v mandoc >/dev/null || missing="$$missing mandoc"; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	test -x /usr/sbin/sshd || missing="$$missing openssh-server"; \
	command -v ssh >/dev/null || missing="$$missing openssh-client"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "make deps: installing$$missing"; \
			(apt-get install -y -qq $$missing >/dev/null 2>&1 || \
			 (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null)) || exit 1; \
		else \
			echo "make deps: missing$$missing (not root: the tests that need them skip)"; \
		fi; \
	fi

bench-deps:
	@command -v mpirun >/dev/null && command -v mpicc >/dev/null && command -v hyperfine >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(BENCH_DEBS) >/dev/null)

vet:
	$(GO) vet ./...

# The whole suite, with the race detector; then the tests of what it
# changes: the allocation tests, which skip under it (it makes sync.Pool
# drop what it is given), and spmd's shared words, whose release stores it
# turns into sequentially consistent ones.
test: deps vet
	$(GO) test -race -count=1 -timeout 30m ./...
	$(GO) test -count=1 -run AllocateNothing ./prims ./net/tcp ./strategies/nn/gemm
	$(GO) test -count=1 -run 'Shared' ./spmd ./prims

# Launch to all-ranks-ready against mpirun (issue: launch latency).
bench-launch: bench-deps
	bench/launch/run.sh 8 20

# gorun's collectives against Open MPI's, side by side, in one run, with an
# SVG chart: out of the box (shared memory), and both over TCP only.
bench-mpi: bench-deps
	MODE=default bench/mpi.sh

bench-tcp: bench-deps
	MODE=tcp NPS="2 4" OPS=allreduce bench/mpi.sh

# How often topo's choice is within 15% of the fastest algorithm measured.
bench-choice: bench-deps
	bench/choice.sh

man:
	$(GO) test ./cmd/gorun -run TestManPage -update
	$(GO) test ./cmd/goprof -run TestManPage -update

# examples/ddp against PyTorch DDP on the same MLP, in one run.
bench-ddp:
	bench/ddp.sh

# strategies/zero's stages against DDP (step time) and the ZeRO paper's
# memory table measured on a 50M-parameter model at 4 ranks.
bench-zero:
	bench/zero.sh

# examples/gpt: pipeline bubble and activations, tensor-parallel collectives, layouts against the planner.
bench-gpt:
	bench/gpt.sh | tee bench/results/gpt.txt

# Gradient compression: convergence and bytes per codec on examples/gpt, codec throughput.
bench-compress:
	bench/compress.sh

# What gorun --profile costs collbench's 8-byte all-reduce and a DDP step,
# the trace's size per event, and goprof report on a million events.
bench-profile:
	@command -v /usr/bin/time >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null)
	bench/profile.sh
