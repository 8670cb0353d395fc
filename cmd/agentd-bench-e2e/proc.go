package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// tick is the unit of /proc/<pid>/stat's times: USER_HZ, which Linux fixes
// at 100 for user space whatever the kernel's own tick.
const tick = 10 * time.Millisecond

// stat is what the harness reads of /proc/<pid>/stat.
type stat struct {
	ppid     int
	zombie   bool
	self     time.Duration // utime+stime of every thread, live or gone
	children time.Duration // cutime+cstime: the children it has reaped
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (stat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	// so the fields are counted from the last ')'; field 3 (state) is
	// fields[0], utime (14) fields[11], stime, cutime, cstime after it.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(fields) < 15 {
		return stat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var n [5]int64
	for i, f := range []int{1, 11, 12, 13, 14} {
		if n[i], err = strconv.ParseInt(fields[f], 10, 64); err != nil {
			return stat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return stat{
		ppid:     int(n[0]),
		zombie:   fields[0] == "Z",
		self:     time.Duration(n[1]+n[2]) * tick,
		children: time.Duration(n[3]+n[4]) * tick,
	}, nil
}

// children lists the live (not zombie) child processes of pid.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range entries {
		if child, err := strconv.Atoi(e.Name()); err == nil && liveChildOf(child, pid) {
			kids = append(kids, child)
		}
	}
	return kids
}

// liveChildOf reports whether process child is a live (not zombie) child
// of pid; false when it is gone.
func liveChildOf(child, pid int) bool {
	st, err := readStat(child)
	return err == nil && st.ppid == pid && !st.zombie
}

// childrenCPU is the CPU time of pid's children but those in skip: the
// reaped ones' (pid's cutime+cstime) and the live ones' (each one's own,
// and its reaped children's). The difference of two readings is what the
// children spent between them, a child that ended meanwhile included: its
// time moves from the live sum to the reaped one.
func childrenCPU(pid int, skip ...int) (time.Duration, []int, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, nil, err
	}
	total := st.children
	var live []int
	for _, kid := range children(pid) {
		if slices.Contains(skip, kid) {
			continue
		}
		ks, err := readStat(kid)
		if err != nil {
			continue // ended meanwhile: counted with the reaped, if reaped yet
		}
		total += ks.self + ks.children
		live = append(live, kid)
	}
	return total, live, nil
}

// rss reads a process's VmRSS.
func rss(pid int) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "VmRSS" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status VmRSS: %w", pid, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	st, err := readStat(pid)
	return err == nil && !st.zombie
}
