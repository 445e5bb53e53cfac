//go:build race

package frame

// raceEnabled: the race detector's instrumentation allocates, so
// allocation counts are not the library's.
const raceEnabled = true
