package main

import (
	"os"
	"strings"
	"testing"
)

// TestDocumentedCodeIsThisProgram holds docs/writing-an-environment.md to
// this directory: the guide's program and its test are main.go and
// wallet_test.go, byte for byte, so the guide shows code that builds and
// passes.
func TestDocumentedCodeIsThisProgram(t *testing.T) {
	doc, err := os.ReadFile("../../docs/writing-an-environment.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(doc))
	for _, file := range []string{"main.go", "wallet_test.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, b := range blocks {
			if b == string(src) {
				found = true
			}
		}
		if !found {
			t.Errorf("docs/writing-an-environment.md has no go block equal to %s: update one from the other", file)
		}
	}
}

// goBlocks returns the contents of every ```go fenced block of a
// Markdown document, each ending in a newline.
func goBlocks(doc string) []string {
	var out []string
	var cur *strings.Builder
	for line := range strings.Lines(doc) {
		switch {
		case cur == nil && strings.TrimRight(line, "\n") == "```go":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimRight(line, "\n") == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return out
}
