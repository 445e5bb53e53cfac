package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the wire codec and compares it
// with the checked-in file: after a change to wire.go, run go generate
// ./serialize.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	dir := filepath.Join("..", "..")
	got, err := generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, outFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what wiregen writes from %s: run go generate ./serialize", outFile, inFile)
	}
}
