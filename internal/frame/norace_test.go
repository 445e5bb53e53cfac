//go:build !race

package frame

// raceEnabled: see race_test.go.
const raceEnabled = false
