package fileexport

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gymlens/gymlens/lens/telfile"
)

// mountTmpfs mounts a tmpfs of size on a new directory and unmounts it
// when the test ends; it skips the test when that is not possible (not
// root, no mount).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// A full disk cuts a batch part-way; once there is room again, the sink
// goes on appending. The records written after the cut must all be
// readable: the cut line is one corrupt line, not glued to the next.
func TestWriteAfterShortWriteStartsANewLine(t *testing.T) {
	dir := mountTmpfs(t, "128k")
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFile(filepath.Join(dir, "t.jsonl"), testResource())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batch := func(tag string, n int) []byte {
		var b []byte
		for i := range n {
			var err error
			b, err = telfile.AppendLine(b, &telfile.Log{Severity: "INFO", Body: fmt.Sprintf("%s-%d %s", tag, i, strings.Repeat("x", 400))})
			if err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	full := false
	for i := 0; i < 1000 && !full; i++ {
		err := s.write(batch(fmt.Sprintf("before%d", i), 10))
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) && !strings.Contains(err.Error(), "short write") {
				t.Fatalf("write %d: %v, want ENOSPC", i, err)
			}
			full = true
		}
	}
	if !full {
		t.Fatal("the 128 KiB file system never filled")
	}
	t.Logf("cut part-way: %v", s.cut)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.write(batch(fmt.Sprintf("after%d", i), 10)); err != nil {
			t.Fatalf("write after room was made: %v", err)
		}
	}
	after, skipped := 0, 0
	err = telfile.ReadSkipping(mustOpen(t, filepath.Join(dir, "t.jsonl")), func(r telfile.Record) error {
		if r.Log != nil && strings.HasPrefix(r.Log.Body, "after") {
			after++
		}
		return nil
	}, func(line int, err error) {
		skipped++
		t.Logf("skipped line %d: %.80v", line, err)
	})
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if after != 30 || skipped > 1 {
		t.Errorf("read %d of the 30 records written after the cut, skipped %d lines; want all 30 and at most the cut line", after, skipped)
	}
}

func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
