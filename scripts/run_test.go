package scripts

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeAgentd stands in for bin/agentd: `serve` logs that it serves, where
// AGENTD_LISTEN says (the default's address otherwise; port 0 as port
// 40123, as if the kernel chose it), in the format FAKE_FORMAT says, then
// one more line, and exits FAKE_EXIT.
const fakeAgentd = `#!/usr/bin/env bash
addr=${AGENTD_LISTEN:-127.0.0.1:7070}
addr=${addr%:0}
[[ $addr == *:* ]] || addr=$addr:40123
if [[ $FAKE_FORMAT == json ]]; then
  echo '{"level":"INFO","msg":"agentd serving","address":"'"$addr"'","bridge":"embedded"}' >&2
else
  echo 'level=INFO msg="agentd serving" address='"$addr"' bridge=embedded' >&2
fi
echo 'level=INFO msg=providers with_key=none' >&2
exit ${FAKE_EXIT:-0}
`

// make run (scripts/run.sh) serves where LISTEN says, passes agentd's log
// through, and, after agentd's line that it serves, prints what to try
// against the address agentd bound (the port chosen for port 0), text or
// JSON log alike; against another address than the default, with it
// (AGENTD_ADDR for agentd's client, an argument for the examples). It
// exits as agentd does.
func TestRun(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("run.sh")
	if err != nil {
		t.Fatal(err)
	}
	agentd := filepath.Join(t.TempDir(), "agentd")
	if err := os.WriteFile(agentd, []byte(fakeAgentd), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, listen, format, exit string
		wantCode                   int
		want, wantNot              []string
	}{
		{name: "the default address", want: []string{
			"agentd serves on 127.0.0.1:7070",
			"\n  " + agentd + " generate --request examples/demo-start.json",
			"grpcurl -plaintext 127.0.0.1:7070 list",
			"\n  go run ./examples/go\n",
		}, wantNot: []string{"AGENTD_ADDR"}},
		{name: "LISTEN", listen: "127.0.0.1:7171", want: []string{
			"agentd serves on 127.0.0.1:7171",
			"AGENTD_ADDR=127.0.0.1:7171 " + agentd + " generate --request examples/demo-start.json",
			"AGENTD_ADDR=127.0.0.1:7171 " + agentd + " generate --provider mock",
			"grpcurl -plaintext 127.0.0.1:7171 list",
			"go run ./examples/go 127.0.0.1:7171\n",
			"examples/python/demo.py 127.0.0.1:7171\n",
			"node build/ts/examples/ts/demo.js 127.0.0.1:7171\n",
		}},
		{name: "port 0: the port chosen", listen: "127.0.0.1:0", want: []string{
			"agentd serves on 127.0.0.1:40123", "AGENTD_ADDR=127.0.0.1:40123 ", "grpcurl -plaintext 127.0.0.1:40123 list",
		}},
		{name: "a JSON log", listen: "127.0.0.1:7171", format: "json", want: []string{
			`"msg":"agentd serving","address":"127.0.0.1:7171"`, "agentd serves on 127.0.0.1:7171", "AGENTD_ADDR=127.0.0.1:7171 ",
		}},
		{name: "agentd's exit", exit: "2", wantCode: 2, want: []string{"agentd serves on 127.0.0.1:7070"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{script, agentd, "grpcurl"}
			if tc.listen != "" {
				args = append(args, tc.listen)
			}
			cmd := exec.CommandContext(t.Context(), "bash", args...)
			cmd.Env = append(os.Environ(), "AGENTD_LISTEN=", "FAKE_FORMAT="+tc.format, "FAKE_EXIT="+tc.exit)
			out, err := cmd.CombinedOutput()
			if code := exitCode(t, err); code != tc.wantCode {
				t.Errorf("exit code %d, want %d", code, tc.wantCode)
			}
			got := string(out)
			serving := strings.Index(got, "agentd serving")
			banner := strings.Index(got, "agentd serves on")
			if serving < 0 || banner < serving || !strings.Contains(got, "msg=providers") {
				t.Errorf("agentd's log is not passed through with the banner after its serving line:\n%s", got)
			}
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("the output does not say %q:\n%s", want, got)
				}
			}
			for _, not := range tc.wantNot {
				if strings.Contains(got, not) {
					t.Errorf("the output says %q:\n%s", not, got)
				}
			}
		})
	}
}

// exitCode is the exit code of a command that ended with err (what Run
// or CombinedOutput returned); an error that is no exit fails the test.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}
