# lanes build. Two commands matter on a fresh Debian machine, as root:
#   make demo   build everything and run the headline lab experiment
#   make test   run every test (unit, BPF, integration in fresh namespaces)
GO      := ./scripts/go
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
export CGO_ENABLED := 0
# staticcheck, run by make test and make lint: a pinned version fetched from
# the Go module proxy and run with `go run` (a tool, not a module dependency).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Output folder of binaries and packages (tests point it at a scratch folder).
OUT     ?= bin
# make install: PREFIX (default /usr/local) and DESTDIR (staging root).
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  := $(PREFIX)/bin
LIBEXECDIR := $(PREFIX)/libexec
SHAREDIR := $(PREFIX)/share
INCLUDEDIR := $(PREFIX)/include
# lanes-rt.pc: header only, so architecture-independent (share/pkgconfig).
PKGCONFIGDIR := $(SHAREDIR)/pkgconfig
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc
# The Debian version: 0.0~git<commit date>.<commit>-<revision>, sorting by
# date; DEBREVISION numbers builds of one tree (make system-check upgrades
# revision 1 to 2).
DEBREVISION ?= 1
DEBVERSION := 0.0~git$(shell git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || date +%Y%m%d).$(shell git rev-parse --short HEAD 2>/dev/null || echo 0)-$(DEBREVISION)
DEBARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)

.PHONY: all build native cross examples rtd generate generate-check test test-short demo screenshots lint bench bench-rtd clean install install-rt-dev deb kernel-check android-check android-sepolicy system-check leakcheck stress-test soak cost fuzz

all: build

# build: this machine's binaries only (bin/lanes, bin/lanes-rtd); the arm64
# and Android builds, which install a cross compiler, are make cross.
build: native

native: rtd
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(OUT)/lanes ./cmd/lanes

# lanes-rtd, the realtime lane's data path outside Go's runtime (rtd/,
# docs/realtime.md "The data path process"): the daemon runs it from beside
# its own executable (or ../libexec/lanes/). A plain `go build` has no
# lanes-rtd: the daemon then runs without the realtime lane, and says so.
# Hardened as Debian builds C (dpkg-buildflags): fortified libc calls,
# read-only relocations bound at start.
RTD_CFLAGS := -O2 -Wall -Wextra -Werror -Wno-unknown-pragmas -std=gnu11 -fwrapv -D_FORTIFY_SOURCE=2 -Iinternal/bpf/edfqdisc -Iinclude
RTD_LDFLAGS ?= -Wl,-z,relro -Wl,-z,now
RTD_SRC := $(wildcard rtd/*.c rtd/*.h) internal/bpf/edfqdisc/edf_core.h include/lanes_rt.h
rtd: $(OUT)/lanes-rtd

$(OUT)/lanes-rtd: $(RTD_SRC)
	@./scripts/deps.sh build
	@mkdir -p $(OUT)
	$(CC) $(RTD_CFLAGS) $(RTD_LDFLAGS) -o $@ $(filter %.c,$^)

# lanes-rtd's admission (rtd/test/bench_admit.c) at queue depths 100, 1,000
# and 16,384: ns per request, and the ratio of the deepest to the shallowest.
bench-rtd:
	@mkdir -p $(OUT)
	$(CC) $(RTD_CFLAGS) -Irtd -o $(OUT)/bench-rtd rtd/test/bench_admit.c $(filter-out rtd/main.c,$(filter %.c,$(RTD_SRC)))
	$(OUT)/bench-rtd

# Device makers run lanes on phones and boards: cross-build with CGO off and
# without the lab (-tags nolab: 16% smaller; docs/ARCHITECTURE.md).
# lanes-rtd for arm64 is static (glibc's, no loader needed: it runs on
# Android's kernel too); install it beside lanes as lanes-rtd.
cross:
	GOOS=linux   GOARCH=arm64 $(GO) build -trimpath -tags nolab -ldflags '$(LDFLAGS)' -o $(OUT)/lanes-linux-arm64 ./cmd/lanes
	GOOS=android GOARCH=arm64 $(GO) build -trimpath -tags nolab -ldflags '$(LDFLAGS)' -o $(OUT)/lanes-android-arm64 ./cmd/lanes
	@./scripts/deps.sh cross
	aarch64-linux-gnu-gcc $(RTD_CFLAGS) -static -o $(OUT)/lanes-rtd-arm64 $(filter %.c,$(RTD_SRC))

# The C examples of include/ (examples/*/): built with the system compiler,
# warnings as errors; make test builds them too.
EXAMPLE_CFLAGS := -O2 -Wall -Wextra -Werror -std=c11 -Iinclude
examples: $(OUT)/rt-echo

$(OUT)/rt-echo: examples/rt-echo/rt-echo.c include/lanes_rt.h
	@mkdir -p $(OUT)
	$(CC) $(EXAMPLE_CFLAGS) -o $@ examples/rt-echo/rt-echo.c

# Rebuild the BPF objects from their C sources (needs the pinned clang); the
# results are committed so that a plain `go build` needs no clang. The build
# is hermetic (vendored headers, -nostdinc): the same bytes on any machine
# with that clang. generate-check rebuilds into a scratch folder and fails if
# a committed object differs from its sources' build (make test runs it too).
generate:
	./scripts/deps.sh generate
	$(GO) generate ./...
	@$(MAKE) --no-print-directory generate-check

generate-check:
	./scripts/deps.sh generate
	$(GO) test -count=1 -run '^(TestObjectsMatchSources|TestGenerateLinesHermetic)$$' ./internal/bpf/gencheck/

# test: the C examples; go vet and staticcheck; every test, and the unit
# tests again under the race detector (-short: the traffic tests are
# skipped there), as three streams side by side (scripts/test-streams.sh);
# the leak check.
test:
	./scripts/deps.sh test
	@$(MAKE) --no-print-directory examples
	$(GO) run ./internal/leaks/leakcheck -save .leaks-before-test
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@tmp=$$(mktemp -d /tmp/ltXXXXXX) && chmod 1777 $$tmp && echo "tests' TMPDIR: $$tmp" && \
	./scripts/test-streams.sh $$tmp; rc=$$?; \
	$(GO) run ./internal/leaks/leakcheck -since .leaks-before-test -tmp $$tmp || rc=1; exit $$rc

# lanes-rtd's fuzz target (rtd/fuzz/: libFuzzer, ASan, UBSan, a leaked
# descriptor fails it) for FUZZ_TIME seconds, and the wire parsers' Go fuzz
# targets for as long each; make test runs the first for 60 s and the
# second's seeds.
FUZZ_TIME ?= 600
# The Go fuzz targets run on Go 1.27.3 (fetched once through the module
# proxy, as GOTOOLCHAIN does): Go 1.26's fuzzing coordinator can fail a
# target that found nothing with "context deadline exceeded" as its
# -fuzztime ends (golang/go#75804, fixed in 1.27).
FUZZ_GO ?= go1.27.3
fuzz:
	./scripts/deps.sh test
	FUZZ_TIME=$(FUZZ_TIME) $(GO) test -count=1 -p 1 -timeout 0 -v -run '^TestFuzzRtd$$' ./internal/rtlane/
	GOTOOLCHAIN=$(FUZZ_GO) $(GO) test -run '^$$' -fuzz '^FuzzParseRequest$$' -fuzztime $(FUZZ_TIME)s ./internal/rtlane/wire/
	GOTOOLCHAIN=$(FUZZ_GO) $(GO) test -run '^$$' -fuzz '^FuzzParseReply$$' -fuzztime $(FUZZ_TIME)s ./internal/rtlane/wire/

# Fails if anything of lanes is left on the machine (files under /run/lanes
# and /var/lib/lanes, cgroups, mounts, test namespaces, BPF programs,
# struct_ops congestion controls): the end of every `make test`, which
# counts only what appeared during its run (LEAKS_BEFORE: the list saved
# before it; what a killed earlier run left is listed, not counted), and
# which also fails on anything the tests left in their own TMPDIR.
leakcheck:
	$(GO) run ./internal/leaks/leakcheck $(if $(LEAKS_BEFORE),-since $(LEAKS_BEFORE))

# Not part of make test (it downloads Debian kernel packages): boots Linux
# 5.10 and 7.2 (x86-64) and 7.2 arm64 in qemu and runs lanes doctor and the
# kernel-facing tests in each; on 7.2 x86-64 (PREEMPT_DYNAMIC) also the rt
# experiment's (b), lanes switching the preemption model, in a VM of its own.
kernel-check:
	KERNEL=5.10 ./scripts/kernel-vm.sh
	KERNEL=7.2 ./scripts/kernel-vm.sh
	KERNEL=7.2 ./scripts/kernel-vm.sh ./internal/lab/rt/
	KERNEL=7.2 ARCH=arm64 ./scripts/kernel-vm.sh

# The GKI-configured arm64 kernel (scripts/gki-kernel.sh builds and caches
# it): lanes doctor and the kernel-facing tests there (docs/android.md).
android-check:
	KERNEL=gki-6.12 ARCH=arm64 ./scripts/kernel-vm.sh

# Not part of make test (it reads system/sepolicy from SEPOLICY_SRC, a git
# dir or URL, once; then from the cache): the OEM kit's SELinux fragment
# compiled with Android's platform policy, its neverallows checked
# (docs/android.md; dist's TestAndroidSELinuxFragment runs on the cache).
android-sepolicy:
	./scripts/android-sepolicy.sh

# Not part of make test (it debootstraps Debian 12 and boots it in qemu):
# the .deb installed with apt and run under systemd as a user would
# (enable --now, status, a held background transfer, reload, the realtime
# lane's lanes-rtd under the unit, restart, stop leaving nothing, journal,
# systemd-analyze security).
system-check:
	./scripts/system-vm.sh

# Not in CI's time budget: the integration packages 20 times in a row on a
# machine loaded with 2 busy processes; any failure is a flake to fix.
STRESS_PKGS ?= ./internal/daemon/ ./internal/datapath/ ./internal/rtlane/ ./internal/coop/ ./internal/api/ ./internal/sched/ ./internal/tcpmon/
STRESS_RUNS ?= 20
stress-test:
	./scripts/stress-test.sh $(STRESS_RUNS) $(STRESS_PKGS)

# Not in CI's time budget: the daemon's churn soak (internal/daemon/
# soak_test.go) for SOAK (default 1h): connections registered and closed,
# `lanes run` processes, coop-capped long flows; it prints RSS, threads,
# fds and every BPF map's entries each interval and fails if they grow.
SOAK ?= 1h
soak:
	LANES_SOAK=$(SOAK) $(GO) test -count=1 -timeout 0 -run '^TestSoakChurn$$' -v ./internal/daemon/

# What the daemon costs at rest (wake-ups a second, CPU ms a minute, RSS)
# over COST (default 60s) beside the goals, its CPU per MB under a
# background and a foreground upload (internal/daemon/cost_test.go), and
# the yield's reaction to a foreground start (yieldreaction_test.go).
COST ?= 60s
cost:
	LANES_COST=$(COST) $(GO) test -count=1 -run '^(TestDaemonCost.*|TestYieldReaction)$$' -v ./internal/daemon/

test-short:
	$(GO) test -short -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

demo: build
	./scripts/deps.sh demo
	./bin/lanes lab demo

# The pictures in docs/ (dashboard.png, dashboard-udp.png, lab-lbe-times.png, monitor-example.png): the dashboard
# (headless Chromium), a lab figure and a lanes plot, drawn from a real daemon, a real lab run and a real monitor run (root).
screenshots:
	./scripts/screenshots.sh

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# install: the binary, man pages (the command tree's and lanes-policy(5),
# from docs/policy.md) and shell completions generated from the command
# tree, the traces, the example policies, the systemd unit, the default
# policy (kept if one is there), README and licences; and install-rt-dev's
# files.
install: native install-rt-dev
	install -Dm755 $(OUT)/lanes $(DESTDIR)$(BINDIR)/lanes
	install -Dm755 $(OUT)/lanes-rtd $(DESTDIR)$(LIBEXECDIR)/lanes/lanes-rtd
	$(OUT)/lanes gen-docs --man $(DESTDIR)$(SHAREDIR)/man --policy-doc docs/policy.md >/dev/null
	gzip -9nf $(DESTDIR)$(SHAREDIR)/man/man1/lanes*.1 $(DESTDIR)$(SHAREDIR)/man/man5/lanes-policy.5
	install -d $(DESTDIR)$(SHAREDIR)/bash-completion/completions $(DESTDIR)$(SHAREDIR)/zsh/vendor-completions \
		$(DESTDIR)$(SHAREDIR)/fish/vendor_completions.d
	$(OUT)/lanes completion bash > $(DESTDIR)$(SHAREDIR)/bash-completion/completions/lanes
	$(OUT)/lanes completion zsh > $(DESTDIR)$(SHAREDIR)/zsh/vendor-completions/_lanes
	$(OUT)/lanes completion fish > $(DESTDIR)$(SHAREDIR)/fish/vendor_completions.d/lanes.fish
	install -d $(DESTDIR)$(SHAREDIR)/lanes/traces
	install -m644 traces/* $(DESTDIR)$(SHAREDIR)/lanes/traces/
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|@BINDIR@|$(BINDIR)|g' dist/lanes.service.in > $(DESTDIR)$(UNITDIR)/lanes.service
	chmod 644 $(DESTDIR)$(UNITDIR)/lanes.service
	install -d -m755 $(DESTDIR)$(SYSCONFDIR)/lanes
	test -e $(DESTDIR)$(SYSCONFDIR)/lanes/policy.yaml || \
		{ $(OUT)/lanes daemon --print-default-policy > $(DESTDIR)$(SYSCONFDIR)/lanes/policy.yaml && \
		  chmod 644 $(DESTDIR)$(SYSCONFDIR)/lanes/policy.yaml; }
	install -Dm644 README.md $(DESTDIR)$(SHAREDIR)/doc/lanes/README.md
	install -d $(DESTDIR)$(SHAREDIR)/doc/lanes/examples
	install -m644 examples/policies/*.yaml $(DESTDIR)$(SHAREDIR)/doc/lanes/examples/
	install -Dm644 LICENSE $(DESTDIR)$(SHAREDIR)/doc/lanes/LICENSE

# install-rt-dev: what C applications build against, the realtime lane's
# header and its pkg-config file (pkg-config --cflags lanes-rt).
install-rt-dev:
	install -Dm644 include/lanes_rt.h $(DESTDIR)$(INCLUDEDIR)/lanes_rt.h
	install -d $(DESTDIR)$(PKGCONFIGDIR)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(DEBVERSION)|' dist/lanes-rt.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/lanes-rt.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/lanes-rt.pc

# deb: a Debian package built with dpkg-deb alone (no network, no debhelper):
# $(OUT)/lanes_<version>_<arch>.deb; the policy is a conffile; Depends from
# dpkg-shlibdeps; maintainer scripts as dh_installsystemd writes them
# (dist/debian/); lanes --version and lanes status name the package's
# version; built in $(OUT)/deb-build, so that $(OUT)/lanes stays this
# tree's own build; dist/dist_test.go runs lintian on it.
deb:
	@./scripts/deps.sh deb
	rm -rf $(OUT)/deb-root $(OUT)/deb-build
	$(MAKE) --no-print-directory install OUT=$(abspath $(OUT))/deb-build DESTDIR=$(abspath $(OUT))/deb-root PREFIX=/usr UNITDIR=/lib/systemd/system VERSION=$(DEBVERSION)
	strip --remove-section=.comment --remove-section=.note --strip-unneeded $(OUT)/deb-root/usr/libexec/lanes/lanes-rtd
	install -Dm644 dist/debian/copyright $(OUT)/deb-root/usr/share/doc/lanes/copyright
	rm $(OUT)/deb-root/usr/share/doc/lanes/LICENSE
	sed -e 's/@VERSION@/$(DEBVERSION)/' -e "s/@COMMIT@/$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)/" \
		-e "s/@DATE@/$$(git log -1 --format=%cD 2>/dev/null || date -R)/" dist/debian/changelog.in | \
		gzip -9n > $(OUT)/deb-root/usr/share/doc/lanes/changelog.Debian.gz
	install -Dm644 dist/debian/lintian-overrides $(OUT)/deb-root/usr/share/lintian/overrides/lanes
	install -d $(OUT)/deb-root/DEBIAN
	depends=$$(./scripts/deb-depends.sh $(OUT)/deb-root) && \
	sed -e 's/@VERSION@/$(DEBVERSION)/' -e 's/@ARCH@/$(DEBARCH)/' -e "s/@DEPENDS@/$$depends/" \
		-e "s/@SIZE@/$$(du -sk --exclude=DEBIAN $(OUT)/deb-root | cut -f1)/" dist/debian/control.in > $(OUT)/deb-root/DEBIAN/control
	echo /etc/lanes/policy.yaml > $(OUT)/deb-root/DEBIAN/conffiles
	install -m755 dist/debian/postinst dist/debian/prerm dist/debian/postrm $(OUT)/deb-root/DEBIAN/
	cd $(OUT)/deb-root && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | \
		xargs -0 md5sum > DEBIAN/md5sums
	dpkg-deb --root-owner-group -Zgzip --build $(OUT)/deb-root $(OUT)/lanes_$(DEBVERSION)_$(DEBARCH).deb
	rm -rf $(OUT)/deb-root $(OUT)/deb-build

clean:
	rm -rf bin
