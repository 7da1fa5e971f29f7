//go:build linux

package gym

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// readTree is the Linux reader: /proc.
var readTree = func() (treeReading, bool) { return readProcTree("/proc", os.Getpid()) }

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture the kernel's ABI exposes to user space.
const clockTicks = 100

// procStat is what one /proc/<pid>/stat line tells the walk.
type procStat struct {
	ppid       int
	ticks      uint64 // utime + stime
	startTicks uint64
}

// readProcTree walks root (a /proc) for self and all its descendants,
// found by following ppid links, and sums their resident memory
// (statm's resident pages times the page size) and CPU time.
func readProcTree(root string, self int) (treeReading, bool) {
	dir, err := os.Open(root)
	if err != nil {
		return treeReading{}, false
	}
	names, err := dir.Readdirnames(-1)
	_ = dir.Close()
	if err != nil {
		return treeReading{}, false
	}
	stats := make(map[int]procStat, len(names))
	children := map[int][]int{}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		st, ok := readStat(root, pid)
		if !ok {
			continue // exited while we walked, or not ours to read
		}
		stats[pid] = st
		children[st.ppid] = append(children[st.ppid], pid)
	}
	if _, ok := stats[self]; !ok {
		return treeReading{}, false
	}
	page := uint64(os.Getpagesize())
	r := treeReading{cpu: map[procKey]time.Duration{}}
	queue := []int{self}
	seen := map[int]bool{self: true}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		st := stats[pid]
		r.cpu[procKey{pid, st.startTicks}] = time.Duration(st.ticks) * time.Second / clockTicks
		r.rssBytes += residentPages(root, pid) * page
		for _, c := range children[pid] {
			if !seen[c] {
				seen[c] = true
				queue = append(queue, c)
			}
		}
	}
	return r, true
}

// readStat parses /proc/<pid>/stat. The command name (field 2) may hold
// spaces and parentheses, so the fields are counted from its last ')'.
func readStat(root string, pid int) (procStat, bool) {
	b, err := os.ReadFile(root + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	// After ")": state(3) ppid(4) ... utime(14) stime(15) ... starttime(22).
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	field := func(n int) uint64 { // n is the field's number in proc(5)
		v, _ := strconv.ParseUint(string(f[n-3]), 10, 64)
		return v
	}
	return procStat{ppid: int(field(4)), ticks: field(14) + field(15), startTicks: field(22)}, true
}

// residentPages returns the second field of /proc/<pid>/statm, or 0.
func residentPages(root string, pid int) uint64 {
	b, err := os.ReadFile(root + "/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	v, _ := strconv.ParseUint(string(f[1]), 10, 64)
	return v
}
