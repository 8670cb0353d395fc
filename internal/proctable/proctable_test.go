package proctable

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestChildren(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if kids := Children(); !slices.Contains(kids, cmd.Process.Pid) {
		t.Errorf("Children() = %v while %d runs", kids, cmd.Process.Pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait() // reaped: no longer a child, not even a zombie
	if kids := Children(); slices.Contains(kids, cmd.Process.Pid) {
		t.Errorf("Children() = %v after %d was reaped", kids, cmd.Process.Pid)
	}
}
