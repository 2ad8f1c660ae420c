package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// ReadDocument reads a document written by locus-eval -json or locus-eval
// thread -json: exactly one of the results is non-nil, and it is valid.
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
		err = fmt.Errorf("%s: %w: a thread document, not a scoreboard", path, ErrDocument)
	}
	return sb, err
}

// ParseDocument decodes a scoreboard or thread document and validates it
// (Scoreboard.Validate, Thread.Validate): a field this locus-eval does not
// write, or data after the document, is an error too. Every error matches
// ErrDocument.
func ParseDocument(b []byte) (*Scoreboard, *Thread, error) {
	var head struct {
		Schema        string `json:"schema"`
		SchemaVersion int    `json:"schema_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrDocument, err)
	}
	if head.Schema != Schema && head.Schema != ThreadSchema {
		return nil, nil, fmt.Errorf("%w: not a locus-eval document (schema %q)", ErrDocument, head.Schema)
	}
	if head.SchemaVersion != SchemaVersion {
		return nil, nil, fmt.Errorf("%w: schema version %d; this locus-eval reads %d", ErrDocument, head.SchemaVersion, SchemaVersion)
	}
	if head.Schema == ThreadSchema {
		var t Thread
		if err := decodeStrict(b, &t); err != nil {
			return nil, nil, err
		}
		if err := t.Validate(); err != nil {
			return nil, nil, err
		}
		return nil, &t, nil
	}
	var sb Scoreboard
	if err := decodeStrict(b, &sb); err != nil {
		return nil, nil, err
	}
	if err := sb.Validate(); err != nil {
		return nil, nil, err
	}
	return &sb, nil, nil
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// anything after the value.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", ErrDocument, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the document", ErrDocument)
	}
	return nil
}

// ReadScale reads a scaling document written by locus-eval scale -json and
// validates it; every error matches ErrDocument (or is the file's).
func ReadScale(path string) (*Scale, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sc Scale
	if err := decodeStrict(b, &sc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &sc, nil
}

// SchemaOf returns the schema a document file names ("" when it names
// none or is not JSON).
func SchemaOf(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var head struct {
		Schema string `json:"schema"`
	}
	_ = json.Unmarshal(b, &head)
	return head.Schema, nil
}
