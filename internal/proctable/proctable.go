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
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == self && fields[0] != "Z" {
			kids = append(kids, pid)
		}
	}
	return kids
}
