package eval

import (
	"encoding/json"
	"fmt"
	"os"
)

// ReadDocument reads a document written by locus-eval -json or locus-eval
// thread -json: exactly one of the results is non-nil.
func ReadDocument(path string) (*Scoreboard, *Thread, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	sb, t, err := ParseDocument(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return sb, t, nil
}

// ReadScoreboard reads a scoreboard document written by locus-eval -json.
func ReadScoreboard(path string) (*Scoreboard, error) {
	sb, _, err := ReadDocument(path)
	if err == nil && sb == nil {
		err = fmt.Errorf("%s: %w: a thread document, not a scoreboard", path, ErrConfig)
	}
	return sb, err
}

// ParseDocument decodes a scoreboard or thread document, checking its
// schema and version.
func ParseDocument(b []byte) (*Scoreboard, *Thread, error) {
	var head struct {
		Schema        string `json:"schema"`
		SchemaVersion int    `json:"schema_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if head.Schema != Schema && head.Schema != ThreadSchema {
		return nil, nil, fmt.Errorf("%w: not a locus-eval document (schema %q)", ErrConfig, head.Schema)
	}
	if head.SchemaVersion != SchemaVersion {
		return nil, nil, fmt.Errorf("%w: schema version %d; this locus-eval reads %d", ErrConfig, head.SchemaVersion, SchemaVersion)
	}
	if head.Schema == ThreadSchema {
		var t Thread
		if err := json.Unmarshal(b, &t); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		return nil, &t, nil
	}
	var sb Scoreboard
	if err := json.Unmarshal(b, &sb); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return &sb, nil, nil
}
