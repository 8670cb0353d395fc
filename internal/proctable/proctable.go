// Package proctable reads this process's children from Linux's process
// table (/proc): what the leak checks of the tests and the load generator
// count to prove that no child process outlives its owner.
package proctable

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Children lists the live (not zombie) child processes of this process,
// whichever of its threads started them. Where /proc cannot be read it
// lists none.
func Children() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := strconv.Itoa(os.Getpid())
	var kids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && liveChildOf(e.Name(), self) {
			kids = append(kids, pid)
		}
	}
	return kids
}

// liveChildOf reports whether process pid is a child of parent that has
// not exited (not a zombie), as its /proc stat says; false when it is
// gone.
func liveChildOf(pid, parent string) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return false // gone meanwhile
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	state, rest, _ := strings.Cut(strings.TrimSpace(string(stat[bytes.LastIndexByte(stat, ')')+1:])), " ")
	ppid, _, _ := strings.Cut(rest, " ")
	return ppid == parent && state != "Z"
}
