// Package version says which build of agentd is running: its version, the
// commit it was built from and the Go release that built it.
//
// The Makefile's build sets Version and Commit with
//
//	go build -ldflags "-X github.com/agentd/agentd/internal/version.Version=... -X github.com/agentd/agentd/internal/version.Commit=..."
//
// A build without them (go build, go run, go install) reads what the Go
// toolchain recorded instead: the module's version, and the VCS revision
// with "-dirty" when the work tree had changes.
package version

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// Set at build time with -ldflags -X; empty otherwise.
var (
	Version string
	Commit  string
)

// Info is one build's identity.
type Info struct {
	Version   string // a tag (git describe), or "dev"
	Commit    string // the short commit, with "-dirty" for a modified tree; or "unknown"
	GoVersion string
}

// String is the line `agentd version` prints.
func (i Info) String() string {
	return fmt.Sprintf("agentd %s (commit %s, %s)", i.Version, i.Commit, i.GoVersion)
}

var get = sync.OnceValue(func() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Version, Commit, bi)
})

// Get returns the running build's Info.
func Get() Info { return get() }

// resolve picks the linker's values first, then the build info's, then
// "dev" and "unknown".
func resolve(version, commit string, bi *debug.BuildInfo) Info {
	i := Info{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if bi != nil {
		if i.Version == "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		i.Commit = cmp.Or(i.Commit, vcsCommit(bi.Settings))
	}
	i.Version = cmp.Or(i.Version, "dev")
	i.Commit = cmp.Or(i.Commit, "unknown")
	return i
}

// vcsCommit is the short revision the toolchain recorded, with "-dirty"
// when the work tree had changes; "" when it recorded none.
func vcsCommit(settings []debug.BuildSetting) string {
	var rev string
	var modified bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && modified {
		rev += "-dirty"
	}
	return rev
}
