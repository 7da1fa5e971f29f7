package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/dataset"
	"github.com/gymlens/gymlens/gymconfig"
	"github.com/gymlens/gymlens/protocol"
)

// runIdentity is what a run directory's contract.RunIdentityFile holds:
// what the run was made by and, for gymlens run, what identifies the work it
// collects. `gymlens run --resume` continues a directory only when the work it
// would do has the same identity (see runIdentity.mismatch).
type runIdentity struct {
	RunID     string    `json:"run_id"`
	Command   string    `json:"command"`
	CreatedAt time.Time `json:"created_at"`
	// Seed is gymlens run's --seed: the built-in dataset's and policy's.
	Seed *int64 `json:"seed,omitempty"`
	// NumRepeats is gymlens run's --num-repeats.
	NumRepeats int `json:"num_repeats,omitempty"`
	// Dataset is the task list as tasks.jsonl holds it.
	Dataset *datasetIdentity `json:"dataset,omitempty"`
}

// datasetIdentity identifies a task list by content.
type datasetIdentity struct {
	// Source is where the rows came from: the --input path, or the
	// built-in dataset. Informative only: a moved file is the same data.
	Source string `json:"source"`
	// Rows is the number of tasks (after --limit).
	Rows int `json:"rows"`
	// SHA256 is the hex SHA-256 of the rows as dataset.WriteRows writes
	// them (tasks.jsonl's bytes).
	SHA256 string `json:"sha256"`
}

// identifyDataset hashes rows as tasks.jsonl will hold them. A row that
// cannot be written is the caller's usage error, found before anything is
// created.
func identifyDataset(source string, rows []protocol.RunRequest) (*datasetIdentity, error) {
	h := sha256.New()
	if err := dataset.WriteRows(h, rows); err != nil {
		return nil, err
	}
	return &datasetIdentity{Source: gymconfig.ScrubURLs(source), Rows: len(rows), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// mismatch lists, one phrase each, how the work of want (this command)
// differs from that of have (the run directory's); nil when they match.
func (want runIdentity) mismatch(have runIdentity) []string {
	var diffs []string
	if want.Command != have.Command {
		diffs = append(diffs, fmt.Sprintf("command: %s here, %s in the run", want.Command, orNone(have.Command, "none")))
	}
	seed := func(p *int64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprint(*p)
	}
	if seed(want.Seed) != seed(have.Seed) {
		diffs = append(diffs, fmt.Sprintf("--seed: %s here, %s in the run", seed(want.Seed), seed(have.Seed)))
	}
	if want.NumRepeats != have.NumRepeats {
		diffs = append(diffs, fmt.Sprintf("--num-repeats: %d here, %d in the run", want.NumRepeats, have.NumRepeats))
	}
	ds := func(d *datasetIdentity) string {
		if d == nil {
			return "none"
		}
		return fmt.Sprintf("%d rows, sha256 %.12s (%s)", d.Rows, d.SHA256, d.Source)
	}
	if (want.Dataset == nil) != (have.Dataset == nil) ||
		want.Dataset != nil && (want.Dataset.Rows != have.Dataset.Rows || want.Dataset.SHA256 != have.Dataset.SHA256) {
		diffs = append(diffs, fmt.Sprintf("dataset: %s here, %s in the run", ds(want.Dataset), ds(have.Dataset)))
	}
	return diffs
}

// Commands as a run identity names them.
const (
	identityRun      = "gymlens run"
	identityEnvStart = "gymlens env start"
)

// runDir is an open run directory: its path, whether an earlier run made
// it (resumed), and the lock held on it until close.
type runDir struct {
	path    string
	resumed bool
	lock    *os.File
}

// close releases the run directory's lock.
func (d *runDir) close() {
	if d != nil && d.lock != nil {
		_ = d.lock.Close()
		d.lock = nil
	}
}

// checkRunID refuses a run id that is not one plain path element: it
// names runs/<id>/ and must stay inside runsDir.
func checkRunID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`) || strings.ContainsFunc(id, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fmt.Errorf("run id %q must be a plain directory name (no '/', no control characters, not . or ..)", id)
	}
	return nil
}

// openRunDir creates runsDir/<id>/ for a new run, or, with resume,
// reopens an existing one whose identity file matches want. Creating is
// os.Mkdir, which fails when the directory exists, so of two processes
// given the same run id only one can create it; the other is refused
// with the way to resume. The directory stays locked (flock
// on the directory itself) while the run holds it, so a resumed run
// cannot share it with one still running. Without resume nothing is ever
// written into a directory this call did not create.
//
// With resume and no such directory, the run starts afresh, so a job
// script that may be requeued (SLURM_JOB_ID unchanged) can always pass
// --resume.
func openRunDir(runsDir, id string, want runIdentity, resume bool, hint string) (*runDir, error) {
	if err := checkRunID(id); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(runsDir, contract.RunDirPerm); err != nil {
		return nil, fmt.Errorf("runs directory: %w", err)
	}
	path := filepath.Join(runsDir, id)
	err := os.Mkdir(path, contract.RunDirPerm)
	switch {
	case err == nil:
		return createRunDir(path, want)
	case !errors.Is(err, fs.ErrExist):
		return nil, fmt.Errorf("run directory: %w", err)
	case !resume:
		return nil, fmt.Errorf("%s already exists (run id %q): a run directory is never reused; %s", path, id, hint)
	}
	return resumeRunDir(path, want)
}

func createRunDir(path string, want runIdentity) (_ *runDir, err error) {
	d := &runDir{path: path}
	if d.lock, err = lockDir(path); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	b, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(path, contract.RunIdentityFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, contract.RunFilePerm)
	if err != nil {
		return nil, fmt.Errorf("run identity: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return nil, fmt.Errorf("run identity: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("run identity: %w", err)
	}
	if err := os.Mkdir(filepath.Join(path, contract.RunTelemetryDir), contract.RunDirPerm); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	return d, nil
}

func resumeRunDir(path string, want runIdentity) (_ *runDir, err error) {
	d := &runDir{path: path, resumed: true}
	if d.lock, err = lockDir(path); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	idPath := filepath.Join(path, contract.RunIdentityFile)
	b, err := os.ReadFile(idPath)
	if err != nil {
		return nil, fmt.Errorf("cannot resume %s: %w (not a run directory gym made, or one still being created)", path, err)
	}
	have, err := parseRunIdentity(b)
	if err != nil {
		return nil, fmt.Errorf("cannot resume %s: %s: %w", path, contract.RunIdentityFile, err)
	}
	if diffs := want.mismatch(have); len(diffs) > 0 {
		return nil, fmt.Errorf("cannot resume %s: it holds other work (%s); give a new run id to start a run", path, strings.Join(diffs, "; "))
	}
	if err := os.MkdirAll(filepath.Join(path, contract.RunTelemetryDir), contract.RunDirPerm); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	return d, nil
}

// parseRunIdentity reads a run identity file: one JSON object of
// runIdentity's fields, nothing after it.
func parseRunIdentity(b []byte) (runIdentity, error) {
	var id runIdentity
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&id); err != nil {
		return runIdentity{}, err
	}
	if dec.More() {
		return runIdentity{}, errors.New("more than one JSON value")
	}
	if id.Command == "" {
		return runIdentity{}, errors.New("no command")
	}
	return id, nil
}

// lockDir takes an exclusive lock on directory path, without waiting: a
// directory another process holds is refused. The lock lasts
// until the returned file is closed or the process exits.
func lockDir(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by another gym process; wait for it to end", path)
		}
		return nil, fmt.Errorf("run directory %s: lock: %w", path, err)
	}
	return f, nil
}
