package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/gymlens/gymlens/protocol"
)

// DefaultAgent is the agent instance the generators name in agent_ref.
const DefaultAgent = "simple_agent"

// ReadRows reads a task file: one JSON dataset row per line, blank lines
// skipped, the last line with or without its newline, lines of any
// length. Every row must decode and pass RunRequest.Validate, and an
// explicit _ng_rollout_id must have the shape upstream accepts; the first
// row that does not is an error naming its 1-based line, and no rows are
// returned.
func ReadRows(r io.Reader) ([]protocol.RunRequest, error) {
	br := bufio.NewReader(r)
	var rows []protocol.RunRequest
	for lineNo := 1; ; lineNo++ {
		line, readErr := br.ReadBytes('\n')
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return nil, fmt.Errorf("dataset: line %d: read: %w", lineNo, readErr)
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			var row protocol.RunRequest
			if err := json.Unmarshal(trimmed, &row); err != nil {
				return nil, fmt.Errorf("dataset: line %d: %w", lineNo, err)
			}
			if err := CheckRow(&row); err != nil {
				return nil, fmt.Errorf("dataset: line %d: %w", lineNo, err)
			}
			rows = append(rows, row)
		}
		if readErr != nil { // io.EOF
			return rows, nil
		}
	}
}

// CheckRow reports what makes row unusable: a schema violation of
// responses_create_params (a *protocol.ValidationError), an explicit
// _ng_rollout_id upstream would refuse, or an agent_ref that is not an
// object with a string name (see AgentName).
func CheckRow(row *protocol.RunRequest) error {
	if err := row.Validate(); err != nil {
		return err
	}
	if _, _, err := row.ResolveRolloutID(); err != nil {
		return err
	}
	if _, _, err := AgentName(row); err != nil {
		return err
	}
	return nil
}

// AgentName returns the agent instance a row names in agent_ref.name.
// present is false when the row has no agent_ref (or a null one); name is
// "" when its agent_ref has no name. The protocol type reads an agent_ref
// of exactly {type, name} into RunRequest.AgentRef and keeps any other in
// Fields, such as {"name": ...} alone; both count. An agent_ref that is not
// an object, or whose name is not a string, is an error.
func AgentName(row *protocol.RunRequest) (name string, present bool, err error) {
	if row.AgentRef != nil {
		return row.AgentRef.Name, true, nil
	}
	raw, ok := row.Fields.Get(protocol.KeyAgentRef)
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return "", false, nil
	}
	var ref struct {
		Name *string `json:"name"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		return "", true, fmt.Errorf("%s must be an object with a string name: %w", protocol.KeyAgentRef, err)
	}
	if ref.Name == nil {
		return "", true, nil
	}
	return *ref.Name, true, nil
}

// WriteRows writes rows to w, one JSON object per line, in order. It
// refuses, before writing anything, a row that fails CheckRow (naming its
// 1-based position), so that what it writes ReadRows reads back.
func WriteRows(w io.Writer, rows []protocol.RunRequest) error {
	lines := make([][]byte, len(rows))
	for i := range rows {
		if err := CheckRow(&rows[i]); err != nil {
			return fmt.Errorf("dataset: row %d: %w", i+1, err)
		}
		b, err := rows[i].MarshalJSON()
		if err != nil {
			return fmt.Errorf("dataset: row %d: %w", i+1, err)
		}
		lines[i] = b
	}
	bw := bufio.NewWriter(w)
	for _, b := range lines {
		_, _ = bw.Write(b)
		if err := bw.WriteByte('\n'); err != nil {
			return fmt.Errorf("dataset: write: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("dataset: write: %w", err)
	}
	return nil
}

// WithAgent points every row's agent_ref at the agent instance name and
// returns rows (changed in place), for a fleet whose agent is not called
// DefaultAgent.
func WithAgent(rows []protocol.RunRequest, name string) []protocol.RunRequest {
	for i := range rows {
		rows[i].AgentRef = protocol.AgentRef(name)
		rows[i].Fields.Delete(protocol.KeyAgentRef) // one of another shape
	}
	return rows
}

// withDefaultAgent returns row, an environment's own row, run by
// DefaultAgent.
func withDefaultAgent(row protocol.RunRequest) protocol.RunRequest {
	row.AgentRef = protocol.AgentRef(DefaultAgent)
	return row
}
