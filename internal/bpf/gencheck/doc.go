// Package gencheck holds the check that the committed BPF objects are what
// their sources build to: its test runs every `//go:generate` line of the
// repository that compiles BPF (bpf2go or clang) into a scratch copy of the
// sources and compares the outputs byte for byte with the committed files.
//
// The build is hermetic (docs/ARCHITECTURE.md, "Building the BPF
// objects"): the pinned clang major version (PinnedClang), -nostdinc and
// the vendored headers of internal/bpf/include, -Werror. So the same
// sources give the same bytes on any distribution that ships that clang,
// and a source change committed without `make generate` fails `make test`.
package gencheck

// PinnedClang is the compiler every generate line names; scripts/deps.sh
// generate installs it (and its llvm-strip).
const PinnedClang = "clang-19"
