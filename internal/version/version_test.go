package version

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// X-O6: the version comes from the linker's -X values first, then from
// what the Go toolchain recorded (vcs.revision, vcs.modified), then says
// "dev" and "unknown".
func TestResolve(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified},
		}}
	}
	tests := []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            Info
	}{
		{name: "ldflags win", version: "v1.2.3", commit: "abc1234", bi: vcs("0123456789abcdef0123", "true"),
			want: Info{Version: "v1.2.3", Commit: "abc1234"}},
		{name: "build info, clean tree", bi: vcs("0123456789abcdef0123", "false"),
			want: Info{Version: "dev", Commit: "0123456789ab"}},
		{name: "build info, modified tree", bi: vcs("0123456789abcdef0123", "true"),
			want: Info{Version: "dev", Commit: "0123456789ab-dirty"}},
		{name: "module version from go install", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}},
			want: Info{Version: "v0.4.0", Commit: "unknown"}},
		{name: "nothing known", want: Info{Version: "dev", Commit: "unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.want.GoVersion = runtime.Version()
			if diff := cmp.Diff(tt.want, resolve(tt.version, tt.commit, tt.bi)); diff != "" {
				t.Errorf("resolve (-want +got):\n%s", diff)
			}
		})
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	got := Info{Version: "v1.0.0", Commit: "abc1234", GoVersion: "go1.26.0"}.String()
	if want := "agentd v1.0.0 (commit abc1234, go1.26.0)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
