package deploy

// X-O7: the Dockerfile, checked without a Docker engine. Its build command,
// run as it is, builds a static agentd that reports the version and commit
// given as build args, with make build's -ldflags; and the file keeps our
// rules (pinned base images, non-root final targets, exec-form entry point,
// no ADD, the ports agentd listens on exposed).

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/config"
)

// instruction is one Dockerfile instruction, its continuation lines joined.
type instruction struct {
	line int    // where it starts
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// stage is one FROM and the instructions under it.
type stage struct {
	image, name  string
	instructions []instruction
}

func parseDockerfile(t *testing.T) []stage {
	t.Helper()
	f, err := os.Open("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasPrefix(line, "#") {
			continue // a comment inside a continued instruction
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		cur.Reset()
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			s := stage{image: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				s.name = fields[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
		}
		stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instructions {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// execForm is a JSON-array instruction's argument list, or nil.
func execForm(args string) []string {
	var list []string
	if json.Unmarshal([]byte(args), &list) != nil {
		return nil
	}
	return list
}

func TestDockerfileRules(t *testing.T) {
	stages := parseDockerfile(t)
	names := map[string]stage{}
	for _, s := range stages {
		if s.name == "" {
			t.Errorf("FROM %s: every stage is named (AS name)", s.image)
		}
		if _, dup := names[s.name]; dup {
			t.Errorf("stage name %s used twice", s.name)
		}
		names[s.name] = s
		if err := pinnedImage(s.image); err != nil {
			t.Errorf("FROM %s: %v", s.image, err)
		}
		for _, in := range s.instructions {
			switch {
			case in.cmd == "ADD":
				t.Errorf("Dockerfile:%d: ADD: use COPY (ADD fetches URLs and unpacks archives)", in.line)
			case in.cmd == "RUN" && regexp.MustCompile(`\b(curl|wget)\b.*\|\s*(sh|bash)\b`).MatchString(in.args):
				t.Errorf("Dockerfile:%d: RUN pipes a download into a shell", in.line)
			case in.cmd == "MAINTAINER":
				t.Errorf("Dockerfile:%d: MAINTAINER is deprecated", in.line)
			}
		}
	}
	if last := stages[len(stages)-1]; last.name != "agentd" {
		t.Errorf("the last stage, which docker build builds by default, is %s, want agentd", last.name)
	}
	for _, target := range []string{"agentd", "agentd-node"} {
		s, ok := names[target]
		if !ok {
			t.Errorf("no target %s", target)
			continue
		}
		users := s.all("USER")
		if len(users) == 0 {
			t.Errorf("target %s: no USER: it would run as the base image's user", target)
		} else if err := nonRootUser(users[len(users)-1].args); err != nil {
			t.Errorf("target %s: USER %s: %v", target, users[len(users)-1].args, err)
		}
		entry, cmd := s.all("ENTRYPOINT"), s.all("CMD")
		if len(entry) != 1 || !slices.Equal(execForm(entry[0].args), []string{"/usr/local/bin/agentd"}) {
			t.Errorf("target %s: want one ENTRYPOINT [\"/usr/local/bin/agentd\"] (exec form: agentd gets the signals)", target)
		}
		if len(cmd) != 1 || !slices.Equal(execForm(cmd[0].args), []string{"serve"}) {
			t.Errorf("target %s: want CMD [\"serve\"]", target)
		}
		var exposed []string
		for _, in := range s.all("EXPOSE") {
			exposed = append(exposed, strings.Fields(in.args)...)
		}
		if want := []string{"7070", "7071", "9464"}; !slices.Equal(exposed, want) {
			t.Errorf("target %s: EXPOSE %v, want %v: listen, bridge.listen and metrics.listen of image/agentd.yaml", target, exposed, want)
		}
		if !copies(s, "deploy/image/agentd.yaml", "/etc/agentd/agentd.yaml") || !setsEnv(s, "AGENTD_CONFIG=/etc/agentd/agentd.yaml") {
			t.Errorf("target %s: does not copy deploy/image/agentd.yaml to /etc/agentd/agentd.yaml and name it in AGENTD_CONFIG", target)
		}
		// CA certificates: distroless/static ships them; any other base
		// gets the build stage's bundle.
		if !strings.HasPrefix(s.image, "gcr.io/distroless/static") && !copies(s, "/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt") {
			t.Errorf("target %s: no CA certificates", target)
		}
	}
	// The binary embeds the built console, not the page saying how to
	// build it: the build stage takes the console stage's bundle, which
	// the same script as make console makes.
	if c, ok := names["console"]; !ok || !slices.ContainsFunc(c.all("RUN"), func(in instruction) bool { return strings.Contains(in.args, "scripts/console.sh") }) {
		t.Errorf("no console stage running scripts/console.sh")
	}
	if b := names["build"]; !copies(b, "/src/internal/console/dist", "internal/console/dist") {
		t.Errorf("the build stage does not copy the console stage's internal/console/dist")
	}
	if s, ok := names["agentd-node"]; ok && !strings.HasPrefix(s.image, "node:") {
		t.Errorf("target agentd-node is built on %s, not Node.js", s.image)
	}
	// The image's own configuration loads, and its ports are those exposed.
	cfg, err := config.Load("image/agentd.yaml", func(string) string { return "" }, "/usr/local/bin/agentd")
	if err != nil {
		t.Fatalf("image/agentd.yaml: %v", err)
	}
	for setting, addr := range map[string]string{"listen": cfg.Listen, "bridge.listen": cfg.Bridge.Listen, "metrics.listen": cfg.Metrics.Listen} {
		if !regexp.MustCompile(`^0\.0\.0\.0:(7070|7071|9464)$`).MatchString(addr) {
			t.Errorf("image/agentd.yaml: %s %q, want every interface on an exposed port", setting, addr)
		}
	}
	if cfg.StateDir != "/var/lib/agentd" {
		t.Errorf("image/agentd.yaml: state_dir %q, want /var/lib/agentd (owned by the image's user)", cfg.StateDir)
	}
}

// copies reports whether stage s copies src to dst (COPY [--from=...] [--chown=...] src dst).
func copies(s stage, src, dst string) bool {
	for _, in := range s.all("COPY") {
		var paths []string
		for _, f := range strings.Fields(in.args) {
			if !strings.HasPrefix(f, "--") {
				paths = append(paths, f)
			}
		}
		if slices.Equal(paths, []string{src, dst}) {
			return true
		}
	}
	return false
}

// setsEnv reports whether stage s sets the variable name=value.
func setsEnv(s stage, nameValue string) bool {
	for _, in := range s.all("ENV") {
		if slices.Contains(strings.Fields(in.args), nameValue) {
			return true
		}
	}
	return false
}

// pinnedImage reports why a base image is not pinned: no tag or digest,
// or the tag latest.
func pinnedImage(image string) error {
	if strings.Contains(image, "@sha256:") {
		return nil
	}
	last := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	switch {
	case !ok || tag == "":
		return errorString("no tag or digest")
	case tag == "latest":
		return errorString("latest is not a version")
	}
	return nil
}

// nonRootUser reports why USER's argument is not a numeric non-root user:
// Kubernetes' runAsNonRoot can check only a number.
func nonRootUser(arg string) error {
	user, _, _ := strings.Cut(arg, ":")
	uid, err := strconv.Atoi(user)
	switch {
	case err != nil:
		return errorString("not a numeric UID, which runAsNonRoot cannot verify")
	case uid == 0:
		return errorString("root")
	}
	return nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// TestDockerfileBuild runs the Dockerfile's go build command as the image
// build would (sh -c, with the build args as variables), writing into a
// temporary directory instead of /out, and checks the binary: static (no
// interpreter, no shared library) and reporting the version and commit it
// was given. Its -ldflags must be make build's.
func TestDockerfileBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds agentd")
	}
	stages := parseDockerfile(t)
	var build *instruction
	var args []string
	for _, s := range stages {
		for _, in := range s.instructions {
			if in.cmd == "ARG" {
				args = append(args, strings.Fields(in.args)...)
			}
			if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
				build = &in
			}
		}
	}
	if build == nil {
		t.Fatal("no RUN with go build in the Dockerfile")
	}
	if !slices.Contains(args, "VERSION=dev") || !slices.Contains(args, "COMMIT=unknown") {
		t.Errorf("build args %v: want VERSION=dev and COMMIT=unknown, make build's defaults outside git", args)
	}
	if !strings.HasPrefix(build.args, "CGO_ENABLED=0 go build ") {
		t.Errorf("Dockerfile:%d: the build must start CGO_ENABLED=0 go build, for a static binary", build.line)
	}
	if got, want := ldflags(t, build.args), makeLDFLAGS(t); got != want {
		t.Errorf("Dockerfile:%d: -ldflags %q, want make build's %q", build.line, got, want)
	}
	if !strings.HasSuffix(build.args, " -o /out/agentd ./cmd/agentd") {
		t.Fatalf("Dockerfile:%d: want the build to end -o /out/agentd ./cmd/agentd", build.line)
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "-c", strings.Replace(build.args, " -o /out/agentd ", " -o "+filepath.Join(out, "agentd")+" ", 1))
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "VERSION=v0.0.0-image-test", "COMMIT=c0ffee1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build: %v\n%s", err, b)
	}
	bin := filepath.Join(out, "agentd")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a dynamic loader: not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v: not static", libs)
	}
	b, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("agentd version: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "v0.0.0-image-test") || !strings.Contains(string(b), "c0ffee1") {
		t.Errorf("agentd version printed %q, want the build args' version v0.0.0-image-test and commit c0ffee1", b)
	}
}

// ldflags is the -ldflags "..." value of a build command.
func ldflags(t *testing.T, command string) string {
	t.Helper()
	m := regexp.MustCompile(`-ldflags "([^"]*)"`).FindStringSubmatch(command)
	if m == nil {
		t.Fatalf("no -ldflags \"...\" in %q", command)
	}
	return m[1]
}

// makeLDFLAGS is the Makefile's LDFLAGS with its variables expanded and
// the version and commit as the Dockerfile's build args: ${VERSION},
// ${COMMIT}.
func makeLDFLAGS(t *testing.T) string {
	t.Helper()
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"GIT_VERSION": "${VERSION}", "GIT_COMMIT": "${COMMIT}"}
	assign := regexp.MustCompile(`(?m)^(VERSION_PKG|LDFLAGS)\s*:=\s*(.*)$`)
	for _, m := range assign.FindAllStringSubmatch(string(mk), -1) {
		vars[m[1]] = regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(strings.TrimSpace(m[2]), func(ref string) string {
			return vars[ref[2:len(ref)-1]]
		})
	}
	if vars["LDFLAGS"] == "" {
		t.Fatal("no LDFLAGS := in the Makefile")
	}
	return vars["LDFLAGS"]
}
