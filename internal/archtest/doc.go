// Package archtest holds no code: its test enforces the import direction of
// docs/ARCHITECTURE.md §2. Every project package has a row in the table in
// archtest_test.go; a package may import only project packages of lower
// layers (plus a few listed exceptions), msgpack is imported only by
// serialize, and store and its subpackages stay independent of the rest of
// the project. A new package fails the test until it is added to the table.
package archtest
